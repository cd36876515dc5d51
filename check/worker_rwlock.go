package check

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/fenced-dev/fenced/check/history"
	"github.com/fenced-dev/fenced/client"
)

// rwLockRound takes read/write lock name with a session, waiting in its
// FIFO queue: for writing one round in four, then it works on the kv key
// of the name under the write token like a lock holder; for reading
// otherwise, then it reads the key a few times (a read grant's token is
// authority for reading only). Then it releases the grant.
func rwLockRound(ctx context.Context, c *client.Client, xs *crossScoper, rec *recorder, rng *rand.Rand, cfg WorkerConfig, name string, n int) {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, closeSession, err := openSession(sctx, ctx, c, cfg.TTL)
	if err != nil {
		return
	}
	defer closeSession()
	write := rng.IntN(4) == 0
	kind := history.GrantRead
	if write {
		kind = history.GrantWrite
	}
	m := client.NewRWMutex(s, name)
	op := history.Op{Kind: history.OpAcquire, Name: name, GrantKind: kind, Scope: name, Session: s.ID(), Invoke: time.Now().UnixNano()}
	actx, acancel := context.WithTimeout(sctx, 3*time.Second)
	var g *client.RWGrant
	if write {
		g, err = m.Lock(actx)
	} else {
		g, err = m.RLock(actx)
	}
	acancel()
	op.Outcome, op.Error = waitOutcome(err), errText(err)
	if err == nil {
		op.Token, op.Signed = uint64(g.Token()), g.Grant().Signed
	}
	rec.record(op)
	if err != nil {
		return
	}
	xs.maybe(ctx, c, rec, kind, name, g.Token(), n)
	if write {
		work(ctx, c, rec, rng, name, g.Token(), n)
	} else {
		for i := 0; i < 2+rng.IntN(4) && ctx.Err() == nil; i++ {
			readKey(ctx, c, rec, name)
			sleepCtx(ctx, time.Duration(20+rng.IntN(100))*time.Millisecond)
		}
	}
	rel := history.Op{Kind: history.OpRelease, Name: name, GrantKind: kind, Session: s.ID(), Token: op.Token, Invoke: time.Now().UnixNano()}
	rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
	err = m.Unlock(rctx)
	rcancel()
	rel.Outcome, rel.Error = outcomeOf(err), errText(err)
	rec.record(rel)
}
