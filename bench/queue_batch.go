package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// MaxQueueBatch is the largest Options.Batch of the queue workload (the
// server's default --queue-max-batch).
const MaxQueueBatch = 32

// runQueueBatch runs the queue workload with batches of o.Batch items:
// every worker repeats push of o.Batch items in one call → one call that
// acks the items it claimed last and claims up to o.Batch next (fewer
// when fewer are available). A cycle is one item
// acked (Result.Cycles counts items); the claim latency is the batch
// call's, recorded once per item it acked, so percentiles are per item.
// The claim tokens are checked as runQueue checks them.
func runQueueBatch(ctx context.Context, sys System, o Options, lockers []Locker) (Result, error) {
	if o.Batch > MaxQueueBatch {
		return Result{}, fmt.Errorf("bench: queue batch %d out of range; want 1–%d", o.Batch, MaxQueueBatch)
	}
	if _, ok := lockers[0].(BatchQueuer); !ok {
		return Result{}, fmt.Errorf("bench: %s has no queue batches; the queue workload with --batch needs them", sys.Name())
	}
	queue := fmt.Sprintf("bench/queue/%s", runID())
	payloads := make([][]byte, o.Batch)
	for i := range payloads {
		p := make([]byte, queuePayload)
		for j := range p {
			p[j] = 'a' + byte((i+j)%26)
		}
		payloads[i] = p
	}
	var (
		measuring atomic.Bool
		completed atomic.Int64
		errs      errorCount
		tokens    claimTokens
		mu        sync.Mutex
		claim     latencies
		cycle     latencies
		wg        sync.WaitGroup
	)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	for _, l := range lockers {
		q := l.(BatchQueuer)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var myClaim, myCycle latencies
			var held []ItemToken // acked by the next claim
			defer func() {
				for _, it := range held {
					if err := q.Ack(context.WithoutCancel(runCtx), queue, it.Item, it.Token); err != nil {
						errs.add(fmt.Errorf("ack %s/%s token %d: %w", queue, it.Item, it.Token, err))
					}
				}
			}()
			for runCtx.Err() == nil {
				counted := measuring.Load()
				start := time.Now()
				if err := q.PushBatch(runCtx, queue, payloads); err != nil {
					if runCtx.Err() == nil {
						errs.add(fmt.Errorf("push batch %s: %w", queue, err))
						pause(runCtx, 10*time.Millisecond)
					}
					continue
				}
				claimStart := time.Now()
				claimed, ackErrs, err := q.ClaimBatch(runCtx, queue, o.Batch, QueueVisibility, held)
				acked := 0
				for i, it := range held {
					switch {
					case i < len(ackErrs) && ackErrs[i] == nil:
						tokens.acked(it.Item)
						completed.Add(1)
						acked++
					case runCtx.Err() == nil:
						errs.add(fmt.Errorf("ack %s/%s token %d with the next claim: %w", queue, it.Item, it.Token, ackErrs[min(i, len(ackErrs)-1)]))
					}
				}
				held = nil
				if err != nil {
					if runCtx.Err() == nil {
						errs.add(fmt.Errorf("claim batch %s: %w", queue, err))
						pause(runCtx, 10*time.Millisecond)
					}
					continue
				}
				took := time.Since(claimStart)
				var prev uint64
				for _, it := range claimed {
					tokens.claimed(it.Item, it.Token)
					if it.Token <= prev {
						tokens.violations.Add(1) // a batch's tokens increase
					}
					prev = it.Token
				}
				held = claimed
				if counted && measuring.Load() {
					for range acked {
						myClaim = append(myClaim, took)
						myCycle = append(myCycle, time.Since(start))
					}
				}
			}
			mu.Lock()
			claim = append(claim, myClaim...)
			cycle = append(cycle, myCycle...)
			mu.Unlock()
		}()
	}
	m, err := measure(ctx, o, &measuring, &completed, stop, &wg)
	if err != nil {
		return Result{}, err
	}
	return queueResult(sys, o, m, claim, cycle, &tokens, &errs)
}
