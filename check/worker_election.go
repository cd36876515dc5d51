package check

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/fenced-dev/fenced/check/history"
	"github.com/fenced-dev/fenced/client"
)

// electionRound campaigns in election name with a session, waiting in the
// FIFO queue of candidates; as leader it works on the kv key of the name
// under its term token, proclaims a new value one round in four, and
// resigns.
func electionRound(ctx context.Context, c *client.Client, xs *crossScoper, rec *recorder, rng *rand.Rand, cfg WorkerConfig, name string, n int) {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, closeSession, err := openSession(sctx, ctx, c, cfg.TTL)
	if err != nil {
		return
	}
	defer closeSession()
	e := client.NewElection(s, name)
	op := history.Op{Kind: history.OpAcquire, Name: name, GrantKind: history.GrantLeader, Scope: name, Session: s.ID(), Invoke: time.Now().UnixNano()}
	actx, acancel := context.WithTimeout(sctx, 3*time.Second)
	tok, err := e.Campaign(actx, fmt.Sprintf("%s-%d", rec.id, n))
	acancel()
	op.Outcome, op.Error, op.Token = waitOutcome(err), errText(err), uint64(tok)
	if err == nil {
		op.Signed = e.Grant().Signed
	}
	rec.record(op)
	if err != nil {
		return
	}
	xs.maybe(ctx, c, rec, history.GrantLeader, name, tok, n)
	work(ctx, c, rec, rng, name, tok, n)
	if rng.IntN(4) == 0 {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		e.Proclaim(pctx, fmt.Sprintf("%s-%d-proclaimed", rec.id, n))
		pcancel()
	}
	rel := history.Op{Kind: history.OpRelease, Name: name, GrantKind: history.GrantLeader, Session: s.ID(), Token: op.Token, Invoke: time.Now().UnixNano()}
	rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
	err = e.Resign(rctx)
	rcancel()
	rel.Outcome, rel.Error = outcomeOf(err), errText(err)
	rec.record(rel)
}
