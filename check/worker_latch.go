package check

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/check/history"
	"github.com/fenced-dev/fenced/client"
)

// latchWait bounds a latch worker's wait.
const latchWait = time.Second

// latchRound works on latch name: it joins the current generation and,
// when there is none or it is complete (or one round in eight, a reset),
// creates a new one of count 1 to 3 and, when the count is above 1, waits
// on it as its coordinator would; otherwise it counts the generation down
// (three rounds in four) or waits on it. A wait lasts up to latchWait.
// Waiters are released by the other workers' count-downs, so the latch
// checker sees when a wait was answered against the count-downs sent
// before.
func latchRound(ctx context.Context, c *client.Client, rec *recorder, rng *rand.Rand, name string) {
	jctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	cur, err := c.LatchJoin(jctx, name)
	cancel()
	if err != nil && !errors.Is(err, fence.ErrInvalidArgument) {
		sleepCtx(ctx, 50*time.Millisecond)
		return
	}
	if err != nil || cur.Generation == 0 || cur.Count == 0 || rng.IntN(8) == 0 {
		count := uint64(1 + rng.IntN(3))
		op := history.Op{Kind: history.OpLatchCreate, Name: name, Initial: count, Invoke: time.Now().UnixNano()}
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		l, err := c.LatchCreate(cctx, name, count)
		cancel()
		op.Outcome, op.Error, op.Gen = outcomeOf(err), errText(err), l.Generation
		rec.record(op)
		if err == nil && count > 1 {
			waitLatch(ctx, c, rec, l)
		}
		return
	}
	if rng.IntN(4) < 3 {
		op := history.Op{Kind: history.OpCountDown, Name: name, Gen: cur.Generation, Initial: cur.Initial, Invoke: time.Now().UnixNano()}
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		res, l, err := c.LatchCountDown(cctx, name, cur.Generation)
		cancel()
		op.Outcome, op.Error, op.Result = outcomeOf(err), errText(err), string(res)
		if errors.Is(err, client.ErrStaleGeneration) {
			op.Outcome, op.Error = history.Fail, ""
		}
		if l.Generation == cur.Generation {
			op.Count = l.Count
		}
		rec.record(op)
		sleepCtx(ctx, time.Duration(20+rng.IntN(100))*time.Millisecond)
		return
	}
	waitLatch(ctx, c, rec, cur)
}

// waitLatch waits on generation l of its latch, up to latchWait, and
// records the wait.
func waitLatch(ctx context.Context, c *client.Client, rec *recorder, l client.Latch) {
	op := history.Op{Kind: history.OpLatchWait, Name: l.Name, Gen: l.Generation, Initial: l.Initial, Invoke: time.Now().UnixNano()}
	wctx, cancel := context.WithTimeout(ctx, latchWait)
	done, err := c.LatchWait(wctx, l.Name, l.Generation)
	cancel()
	op.Outcome, op.Error = waitOutcome(err), errText(err)
	if err == nil {
		op.Result = "replaced"
		if done {
			op.Result = "completed"
		}
	}
	rec.record(op)
}
