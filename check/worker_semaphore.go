package check

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/fenced-dev/fenced/check/history"
	"github.com/fenced-dev/fenced/client"
)

// semaphoreRound takes one permit of semaphore name (two, one round in
// four, when the capacity allows) with a session, waiting in the FIFO
// queue, works on the kv key of one permit's slot under that permit's
// token ("name/slot": a paused holder of a slot is fenced out by the next
// holder of the slot), and releases the permits. The acquire is recorded
// once per permit, with its scope and the capacity asked for.
func semaphoreRound(ctx context.Context, c *client.Client, xs *crossScoper, rec *recorder, rng *rand.Rand, cfg WorkerConfig, name string, n int) {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, closeSession, err := openSession(sctx, ctx, c, cfg.TTL)
	if err != nil {
		return
	}
	defer closeSession()
	k := 1
	if cfg.Capacity > 1 && rng.IntN(4) == 0 {
		k = 2
	}
	sem := client.NewSemaphore(s, name, cfg.Capacity)
	op := history.Op{Kind: history.OpAcquire, Name: name, GrantKind: history.GrantPermit, Capacity: cfg.Capacity, Session: s.ID(), Invoke: time.Now().UnixNano()}
	actx, acancel := context.WithTimeout(sctx, 3*time.Second)
	ps, err := sem.Acquire(actx, k)
	acancel()
	op.Outcome, op.Error = waitOutcome(err), errText(err)
	op.Complete = time.Now().UnixNano()
	if err != nil {
		rec.record(op)
		return
	}
	list := ps.List()
	for _, p := range list {
		g := op
		g.Token, g.Scope, g.Signed = uint64(p.Token), p.Scope(), p.Grant.Signed
		rec.record(g)
	}
	p := list[rng.IntN(len(list))]
	xs.maybe(ctx, c, rec, history.GrantPermit, p.Scope(), p.Token, n)
	work(ctx, c, rec, rng, p.Scope(), p.Token, n)
	rel := history.Op{Kind: history.OpRelease, Name: name, GrantKind: history.GrantPermit, Session: s.ID(), Token: uint64(list[0].Token), Invoke: time.Now().UnixNano()}
	rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
	err = ps.Release(rctx)
	rcancel()
	rel.Outcome, rel.Error = outcomeOf(err), errText(err)
	rec.record(rel)
}
