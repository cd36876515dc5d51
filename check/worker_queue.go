package check

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/check/history"
	"github.com/fenced-dev/fenced/client"
)

// probeEvery is how often (one round in probeEvery) a queue worker first
// acks its item with a token that is not its claim's: the fsm must refuse
// it (the stale-ack rule's attack, which --ack-any-token lets through).
const probeEvery = 4

// queueRound pushes one item to queue name, claims one item with a session
// (waiting for it), writes the kv key of the claim's scope ("queue/item")
// under the claim token, and acks the item (nacks it one round in eight,
// so that items are delivered again; acks it with the claim of a next
// item one round in ackNextEvery). A paused worker's claim expires and
// the item goes to another worker: the kv rejects the late write and the
// fsm the late ack.
//
// A round pushes as many items as it will claim (two when it acks with
// the claim of the next) before it claims, so no round asks for more new
// items than it tried to push. Without faults a claim then finds an item
// at once. It waits when a push failed, or while the claim of a paused
// or killed holder runs out. It does not wait because the workload drained
// the queue, which would look like a liveness violation after the heal.
func queueRound(ctx context.Context, c *client.Client, rec *recorder, rng *rand.Rand, cfg WorkerConfig, name string, n int) {
	q := client.NewQueue(c, name)
	nack, ackNext := rng.IntN(8) == 0, rng.IntN(ackNextEvery) == 0
	pushes := 1
	if ackNext && !nack {
		pushes = 2
	}
	for i := range pushes {
		value := fmt.Sprintf("%s-%d", rec.id, n)
		if i > 0 {
			value += "-next"
		}
		push := history.Op{Kind: history.OpPush, Name: name, Value: value, Invoke: time.Now().UnixNano()}
		pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
		item, _, err := q.Push(pctx, []byte(push.Value))
		pcancel()
		push.Outcome, push.Error, push.Item = outcomeOf(err), errText(err), item
		rec.record(push)
	}

	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, closeSession, err := openSession(sctx, ctx, c, cfg.TTL)
	if err != nil {
		return
	}
	defer closeSession()
	op := history.Op{Kind: history.OpClaim, Name: name, Session: s.ID(), Invoke: time.Now().UnixNano()}
	cctx, ccancel := context.WithTimeout(sctx, 3*time.Second)
	cl, err := q.Claim(cctx, s, cfg.TTL)
	ccancel()
	op.Outcome, op.Error = waitOutcome(err), errText(err)
	if err == nil {
		op.Item, op.Token, op.Scope = cl.Item, uint64(cl.Token), cl.Scope
	}
	rec.record(op)
	if err != nil {
		return
	}
	work(ctx, c, rec, rng, cl.Scope, cl.Token, n)
	if rng.IntN(probeEvery) == 0 && cl.Token > 1 {
		queueEnd(ctx, rec, history.OpAck, name, cl.Item, cl.Token-1, "probe", func(ctx context.Context) error { return q.AckToken(ctx, cl.Item, cl.Token-1) })
	}
	if nack {
		queueEnd(ctx, rec, history.OpNack, name, cl.Item, cl.Token, "", func(ctx context.Context) error { return cl.Nack(ctx, 0) })
		return
	}
	if ackNext {
		ackAndClaimNext(ctx, sctx, c, rec, rng, s, cl, n)
		return
	}
	queueEnd(ctx, rec, history.OpAck, name, cl.Item, cl.Token, "", cl.Ack)
}

// ackNextEvery is how often (one round in ackNextEvery) a queue worker
// acks its item with the claim of the next one (Claim.AckAndClaimNext),
// one command that the history holds as an ack and a claim of the same
// interval.
const ackNextEvery = 3

// ackAndClaimNext acks cl and claims the next item in one command, does
// the next item's work and acks it.
func ackAndClaimNext(ctx, sctx context.Context, c *client.Client, rec *recorder, rng *rand.Rand, s *client.Session, cl *client.Claim, n int) {
	ack := history.Op{Kind: history.OpAck, Name: cl.Queue, Item: cl.Item, Token: uint64(cl.Token), Invoke: time.Now().UnixNano()}
	claim := history.Op{Kind: history.OpClaim, Name: cl.Queue, Session: s.ID(), Invoke: ack.Invoke}
	cctx, cancel := context.WithTimeout(sctx, 3*time.Second)
	next, ackErr, err := cl.AckAndClaimNext(cctx)
	cancel()
	ack.Complete = time.Now().UnixNano()
	claim.Complete = ack.Complete
	ack.Outcome, ack.Error = outcomeOf(ackErr), errText(ackErr)
	claim.Outcome, claim.Error = waitOutcome(err), errText(err)
	if err == nil {
		claim.Item, claim.Token, claim.Scope = next.Item, uint64(next.Token), next.Scope
	}
	rec.record(ack)
	rec.record(claim)
	if err != nil {
		return
	}
	work(ctx, c, rec, rng, next.Scope, next.Token, n)
	queueEnd(ctx, rec, history.OpAck, next.Queue, next.Item, next.Token, "", next.Ack)
}

// queueEnd runs end, the ack or nack (kind) of item with token, and
// records it; result marks a probe.
func queueEnd(ctx context.Context, rec *recorder, kind history.Kind, name string, item uint64, token fence.Token, result string, end func(context.Context) error) {
	op := history.Op{Kind: kind, Name: name, Item: item, Token: uint64(token), Result: result, Invoke: time.Now().UnixNano()}
	actx, cancel := context.WithTimeout(ctx, 3*time.Second)
	err := end(actx)
	cancel()
	op.Outcome, op.Error = outcomeOf(err), errText(err)
	rec.record(op)
}

// nextClaims is how many next items a batch round's ack-and-claim-next
// claims at most.
const nextClaims = 2

// batchEvery is how often (one round in batchEvery) a queue worker works
// in batches (queueBatchRound) instead.
const batchEvery = 3

// queueBatchRound is queueRound in batches: it pushes 1 to 3 items in one
// call (PushBatch), 2 more when it will ack with the claim of the next
// (as many as it will claim, as queueRound does), claims up to the first
// 1 to 3 (ClaimBatch), writes each claim's kv
// key under its token, probes one round in probeEvery with a stale token
// inside an ack batch (AckTokens, with the item's earlier token: the fsm
// must answer it stale, which --ack-any-token lets through), and acks
// them all in one call (AckBatch), or one round in ackNextEvery with the
// claim of up to 2 next items (AckAndClaimNextBatch), whose items it then
// acks in a batch. Each item of a batch call is its own op of the call's
// interval in the history.
func queueBatchRound(ctx context.Context, c *client.Client, rec *recorder, rng *rand.Rand, cfg WorkerConfig, name string, n int) {
	q := client.NewQueue(c, name)
	claims, ackNext := 1+rng.IntN(3), rng.IntN(ackNextEvery) == 0
	toPush := claims
	if ackNext {
		toPush += nextClaims
	}
	items := make([]client.PushItem, toPush)
	pushes := make([]history.Op, len(items))
	invoke := time.Now().UnixNano()
	for i := range items {
		pushes[i] = history.Op{Kind: history.OpPush, Name: name, Value: fmt.Sprintf("%s-%d-%d", rec.id, n, i), Invoke: invoke}
		items[i].Payload = []byte(pushes[i].Value)
	}
	pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
	pushed, err := q.PushBatch(pctx, items)
	pcancel()
	for i := range pushes {
		pushes[i].Outcome, pushes[i].Error = outcomeOf(err), errText(err)
		if err == nil {
			pushes[i].Item = pushed[i].Item
		}
		rec.record(pushes[i])
	}

	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, closeSession, err := openSession(sctx, ctx, c, cfg.TTL)
	if err != nil {
		return
	}
	defer closeSession()
	claim := history.Op{Kind: history.OpClaim, Name: name, Session: s.ID(), Invoke: time.Now().UnixNano()}
	cctx, ccancel := context.WithTimeout(sctx, 3*time.Second)
	cls, err := q.ClaimBatch(cctx, s, cfg.TTL, claims)
	ccancel()
	recordClaims(rec, claim, cls, err)
	if err != nil {
		return
	}
	for _, cl := range cls {
		work(ctx, c, rec, rng, cl.Scope, cl.Token, n)
	}
	if rng.IntN(probeEvery) == 0 && cls[0].Token > 1 {
		probe := []client.ItemToken{{Item: cls[0].Item, Token: cls[0].Token - 1}}
		ackBatch(ctx, rec, name, probe, "probe", func(ctx context.Context) ([]error, error) { return q.AckTokens(ctx, probe) })
	}
	if ackNext {
		ack := make([]client.ItemToken, len(cls))
		for i, cl := range cls {
			ack[i] = client.ItemToken{Item: cl.Item, Token: cl.Token}
		}
		claim := history.Op{Kind: history.OpClaim, Name: name, Session: s.ID(), Invoke: time.Now().UnixNano()}
		var next []*client.Claim
		cctx, ccancel := context.WithTimeout(sctx, 3*time.Second)
		ackBatch(ctx, rec, name, ack, "", func(context.Context) ([]error, error) {
			var ackErrs []error
			next, ackErrs, err = q.AckAndClaimNextBatch(cctx, s, cfg.TTL, nextClaims, cls)
			return ackErrs, nil
		})
		ccancel()
		recordClaims(rec, claim, next, err)
		if err != nil {
			return
		}
		for _, cl := range next {
			work(ctx, c, rec, rng, cl.Scope, cl.Token, n)
		}
		cls = next
	}
	ack := make([]client.ItemToken, len(cls))
	for i, cl := range cls {
		ack[i] = client.ItemToken{Item: cl.Item, Token: cl.Token}
	}
	ackBatch(ctx, rec, name, ack, "", func(ctx context.Context) ([]error, error) { return q.AckBatch(ctx, cls) })
}

// recordClaims records the claims of one batch claim call (one op each,
// or one failed op).
func recordClaims(rec *recorder, op history.Op, cls []*client.Claim, err error) {
	op.Complete = time.Now().UnixNano()
	op.Outcome, op.Error = waitOutcome(err), errText(err)
	if err != nil {
		rec.record(op)
		return
	}
	for _, cl := range cls {
		o := op
		o.Item, o.Token, o.Scope = cl.Item, uint64(cl.Token), cl.Scope
		rec.record(o)
	}
}

// ackBatch runs acks, one call acking items, and records an ack op per
// item with its own outcome (the call's error when it failed as a
// whole); result marks a probe.
func ackBatch(ctx context.Context, rec *recorder, name string, items []client.ItemToken, result string, acks func(context.Context) ([]error, error)) {
	invoke := time.Now().UnixNano()
	actx, cancel := context.WithTimeout(ctx, 3*time.Second)
	errs, err := acks(actx)
	cancel()
	complete := time.Now().UnixNano()
	for i, it := range items {
		e := err
		if e == nil && i < len(errs) {
			e = errs[i]
		}
		rec.record(history.Op{Kind: history.OpAck, Name: name, Item: it.Item, Token: uint64(it.Token), Result: result, Invoke: invoke, Complete: complete,
			Outcome: outcomeOf(e), Error: errText(e)})
	}
}
