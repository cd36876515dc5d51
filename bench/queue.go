package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// QueueVisibility is the visibility timeout of the queue workload's
// claims: long enough that no claim expires while its worker is on its
// way to the ack, so every item is delivered once unless something fails.
const QueueVisibility = 30 * time.Second

// queuePayload is the size of each item the queue workload pushes.
const queuePayload = 128

// runQueue runs the queue workload: every client (worker) repeats push →
// claim → ack on one queue shared by all of them (push → ack of the
// previous item with the claim of the next, two commands instead of three,
// where the system has ack-and-claim-next (AckClaimer) and
// Options.SeparateAck is false), the way an application
// runs many workers on one queue of jobs; the item a worker claims is
// whichever is oldest, often another worker's. A cycle is one item pushed,
// claimed and acked; the acquire latency is the claim's. Every claim's
// token must be above the tokens of the item's earlier claims.
func runQueue(ctx context.Context, sys System, o Options) (Result, error) {
	lockers, err := openLockers(ctx, sys, o.Clients, min(o.Clients, 64), o.TTL)
	if err != nil {
		return Result{}, err
	}
	defer func() { closeLockersAfter(ctx, lockers) }()
	if _, ok := lockers[0].(Queuer); !ok {
		return Result{}, fmt.Errorf("bench: %s has no work queue; the queue workload needs one", sys.Name())
	}
	if o.Batch > 1 {
		return runQueueBatch(ctx, sys, o, lockers)
	}
	queue := fmt.Sprintf("bench/queue/%s", runID())
	payload := make([]byte, queuePayload)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}
	var (
		measuring atomic.Bool
		completed atomic.Int64 // items acked, for Progress
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
		q := l.(Queuer)
		ac, ackWithClaim := q.(AckClaimer)
		ackWithClaim = ackWithClaim && !o.SeparateAck
		wg.Add(1)
		go func() {
			defer wg.Done()
			var myClaim, myCycle latencies
			// With ackWithClaim, the item claimed last (prev) is acked by
			// the next claim.
			var prev string
			var prevToken uint64
			defer func() {
				if prev != "" {
					if err := q.Ack(context.WithoutCancel(runCtx), queue, prev, prevToken); err != nil {
						errs.add(fmt.Errorf("ack %s/%s token %d: %w", queue, prev, prevToken, err))
					}
				}
			}()
			for runCtx.Err() == nil {
				counted := measuring.Load()
				start := time.Now()
				if err := q.Push(runCtx, queue, payload); err != nil {
					if runCtx.Err() == nil {
						errs.add(fmt.Errorf("push %s: %w", queue, err))
						pause(runCtx, 10*time.Millisecond)
					}
					continue
				}
				claimStart := time.Now()
				var item string
				var token uint64
				var err error
				acked := false
				if prev != "" {
					var ackErr error
					item, token, ackErr, err = ac.AckAndClaimNext(runCtx, queue, prev, prevToken)
					switch {
					case ackErr == nil:
						tokens.acked(prev)
						completed.Add(1)
						acked = true
					case runCtx.Err() == nil:
						errs.add(fmt.Errorf("ack %s/%s token %d with the next claim: %w", queue, prev, prevToken, ackErr))
					}
					prev = ""
				} else {
					item, token, err = q.Claim(runCtx, queue, QueueVisibility)
				}
				if err != nil {
					if runCtx.Err() == nil {
						errs.add(fmt.Errorf("claim %s: %w", queue, err))
						pause(runCtx, 10*time.Millisecond)
					}
					continue
				}
				claimed := time.Since(claimStart)
				tokens.claimed(item, token)
				if ackWithClaim {
					// A cycle here is push, the previous item's ack and
					// this claim: it completes one item when it acked one.
					prev, prevToken = item, token
					if acked && counted && measuring.Load() {
						myClaim = append(myClaim, claimed)
						myCycle = append(myCycle, time.Since(start))
					}
					continue
				}
				// The ack is not cut short by the end of the run: the
				// item must not be left claimed.
				if err := q.Ack(context.WithoutCancel(runCtx), queue, item, token); err != nil {
					errs.add(fmt.Errorf("ack %s/%s token %d: %w", queue, item, token, err))
					pause(runCtx, 10*time.Millisecond)
					continue
				}
				tokens.acked(item)
				completed.Add(1)
				if counted && measuring.Load() {
					myClaim = append(myClaim, claimed)
					myCycle = append(myCycle, time.Since(start))
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

// queueResult is the Result of a queue run (one item per call or in
// batches): items/s from the cycles, latencies from claim and cycle (each
// item's), the token checks' counts and the errors.
func queueResult(sys System, o Options, m measurement, claim, cycle latencies, tokens *claimTokens, errs *errorCount) (Result, error) {
	claim.sort()
	cycle.sort()
	r := Result{
		System: sys.Name(), Workload: o.Workload, Clients: o.Clients,
		DurationS: m.elapsed.Seconds(), Cycles: int64(len(cycle)), CyclesPerS: float64(len(cycle)) / m.elapsed.Seconds(),
		P50Ms: claim.percentile(0.50), P90Ms: claim.percentile(0.90), P99Ms: claim.percentile(0.99), MaxMs: claim.percentile(1),
		CycleP50Ms: cycle.percentile(0.50), CycleP99Ms: cycle.percentile(0.99),
		TokenOrderViolations: tokens.violations.Load(), Redeliveries: tokens.redeliveries.Load(), Server: m.server,
	}
	if o.Batch > 1 {
		r.Batch = o.Batch
	}
	errs.fill(&r)
	return m.finish(r)
}

// claimTokens checks the queue workload's claim tokens: each claim of an
// item must carry a token above those of the item's earlier claims. It
// remembers the items claimed and not yet acked, so its memory is bounded
// by the items in flight.
type claimTokens struct {
	mu           sync.Mutex
	last         map[string]uint64 // by item: the token of its latest claim
	violations   atomic.Int64
	redeliveries atomic.Int64
}

// claimed records a claim of item with token.
func (c *claimTokens) claimed(item string, token uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		c.last = map[string]uint64{}
	}
	if prev, ok := c.last[item]; ok {
		c.redeliveries.Add(1)
		if token <= prev {
			c.violations.Add(1)
		}
	}
	c.last[item] = max(c.last[item], token)
}

// acked forgets item: an acked item is never delivered again.
func (c *claimTokens) acked(item string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.last, item)
}
