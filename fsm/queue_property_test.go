package fsm_test

import (
	"bytes"
	"fmt"
	"maps"
	"testing"
	"time"

	"pgregory.net/rapid"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// queueChecker is an Observer that checks the work queue's safety
// properties on every claim as it is granted: an item has at most one live
// claim, claim tokens strictly increase (over every grant), an acked item
// is never delivered again, and a claim takes the oldest available item of
// its queue (FIFO). It reads the machine inside the callback, which a test
// may do since it changes nothing.
type queueChecker struct {
	fsm.NopObserver
	t          *rapid.T
	m          *fsm.Machine
	last       fence.Token
	live       map[string]fence.Token // scope -> live claim token
	scopeOf    map[fence.Token]string
	acked      map[string]bool
	deliveries map[string]uint32 // scope -> grants seen
}

func newQueueChecker(t *rapid.T) *queueChecker {
	return &queueChecker{t: t, live: map[string]fence.Token{}, scopeOf: map[fence.Token]string{}, acked: map[string]bool{}, deliveries: map[string]uint32{}}
}

func (c *queueChecker) Granted(g fence.Grant) {
	if g.Token <= c.last {
		c.t.Fatalf("claim token %d for %s is not above the previous token %d", g.Token, g.Scope, c.last)
	}
	c.last = g.Token
	if g.Kind != fence.KindClaim {
		return
	}
	if tok, ok := c.live[g.Scope]; ok {
		c.t.Fatalf("claim %d of %s while claim %d is live", g.Token, g.Scope, tok)
	}
	if c.acked[g.Scope] {
		c.t.Fatalf("acked item %s delivered again (token %d)", g.Scope, g.Token)
	}
	c.live[g.Scope], c.scopeOf[g.Token] = g.Token, g.Scope
	c.deliveries[g.Scope]++
	// FIFO: no older item of the queue is available and unclaimed.
	clock := c.m.Queue(g.Name).Clock
	for _, it := range c.m.QueueItems(g.Name, 0, 1<<20) {
		if fsm.ClaimScope(g.Name, it.Item) == g.Scope {
			break
		}
		if !it.Claimed && it.AvailableAt <= clock {
			c.t.Fatalf("claim of %s while the older item %d is available", g.Scope, it.Item)
		}
	}
}

func (c *queueChecker) Released(k fence.Kind, name string, session uint64, tok fence.Token, _ int64, _ fsm.EndReason) {
	if k != fence.KindClaim {
		return
	}
	scope, ok := c.scopeOf[tok]
	if !ok || c.live[scope] != tok {
		c.t.Fatalf("end of claim %d (%s), which is not live", tok, scope)
	}
	delete(c.live, scope)
	delete(c.scopeOf, tok)
}

var queueNames = []string{"q", "r"}

// queueRun draws and applies random queue commands, keeping what the draw
// needs: sessions, and the claim tokens handed out (live and ended, so
// stale tokens are presented too).
type queueRun struct {
	t       *rapid.T
	m       *fsm.Machine
	c       *queueChecker
	now     int64
	lastSid uint64
	seqs    map[uint64]uint64
	tokens  []fence.Token // every claim token seen
	log     []*statev1.Command
	maxDel  uint32
	// claimAcks is the ack outcomes of every claim answered, by request.
	claimAcks map[[2]uint64][]fsm.AckOutcome
}

func (r *queueRun) draw() *statev1.Command {
	t := r.t
	// Time mostly moves forward; sometimes a command carries an older
	// clock (a new leader whose clock is behind).
	r.now += rapid.Int64Range(-500, 2000).Draw(t, "dt")
	sid := rapid.Uint64Range(0, r.lastSid+1).Draw(t, "session")
	name := rapid.SampledFrom(queueNames).Draw(t, "queue")
	c := &statev1.Command{NowUnixMs: r.now}
	pickToken := func() (string, uint64, uint64) {
		if len(r.tokens) > 0 && rapid.IntRange(0, 5).Draw(t, "randomtok") > 0 {
			tok := r.tokens[rapid.IntRange(0, len(r.tokens)-1).Draw(t, "tok")]
			if ci, ok := r.m.Claim(tok); ok && rapid.IntRange(0, 3).Draw(t, "othertok") > 0 {
				return ci.Queue, ci.Item, uint64(tok)
			}
			// An ended (stale) token, on an item it once claimed or another.
			return name, rapid.Uint64Range(0, 6).Draw(t, "item"), uint64(tok)
		}
		return name, rapid.Uint64Range(0, 6).Draw(t, "item"), rapid.Uint64Range(0, uint64(r.m.LastToken())+1).Draw(t, "anytok")
	}
	switch rapid.IntRange(0, 15).Draw(t, "op") {
	case 0:
		c.Op = &statev1.Command_CreateSession{CreateSession: &statev1.CreateSession{TtlMs: 1000}}
	case 1:
		if rapid.Bool().Draw(t, "close") {
			c.Op = &statev1.Command_CloseSession{CloseSession: &statev1.CloseSession{Session: sid}}
		} else {
			c.Op = &statev1.Command_ExpireSession{ExpireSession: &statev1.ExpireSession{Session: sid, Term: rapid.Uint64Range(0, 3).Draw(t, "term")}}
		}
	case 2, 3:
		c.Op = &statev1.Command_QueuePush{QueuePush: r.drawPush(name)}
	case 14:
		// A push batch: 1 to 4 pushes (a bad one refuses them all), now
		// and then to two queues (refused) or of none (refused).
		b := &statev1.QueuePushBatch{}
		for range rapid.IntRange(0, 4).Draw(t, "batchpushes") {
			q := name
			if rapid.IntRange(0, 15).Draw(t, "otherqueue") == 0 {
				q = rapid.SampledFrom(queueNames).Draw(t, "batchqueue")
			}
			b.Pushes = append(b.Pushes, r.drawPush(q))
		}
		c.Op = &statev1.Command_QueuePushBatch{QueuePushBatch: b}
	case 15:
		c.Op = &statev1.Command_QueueAckBatch{QueueAckBatch: &statev1.QueueAckBatch{Queue: name, Acks: r.drawAcks(name, pickToken)}}
	case 4, 5, 6:
		r.seqs[sid]++
		seq := r.seqs[sid]
		if rapid.IntRange(0, 5).Draw(t, "retry") == 0 && seq > 1 {
			seq = rapid.Uint64Range(1, seq-1).Draw(t, "oldseq")
		}
		vis := rapid.SampledFrom([]int64{1000, 5000, 99, 12*3600*1000 + 1}).Draw(t, "vis")
		cl := &statev1.QueueClaim{Session: sid, Seq: seq, Queue: name, VisibilityMs: vis, Wait: rapid.Bool().Draw(t, "wait")}
		switch rapid.IntRange(0, 3).Draw(t, "ackwithclaim") {
		case 0, 1:
			// Ack-and-claim-next, with a live, stale, foreign or bad token.
			_, cl.AckItem, cl.AckToken = pickToken()
		case 2:
			// Several acks (now and then one item twice, or a bad one).
			cl.Acks = r.drawAcks(name, pickToken)
		}
		if rapid.Bool().Draw(t, "batchclaim") {
			cl.MaxItems = uint32(rapid.SampledFrom([]int{0, 1, 2, 3, 5, fsm.MaxQueueBatch + 1}).Draw(t, "maxitems"))
		}
		c.Op = &statev1.Command_QueueClaim{QueueClaim: cl}
	case 7:
		q, item, tok := pickToken()
		c.Op = &statev1.Command_QueueAck{QueueAck: &statev1.QueueAck{Queue: q, Item: item, Token: tok}}
	case 8:
		q, item, tok := pickToken()
		c.Op = &statev1.Command_QueueNack{QueueNack: &statev1.QueueNack{Queue: q, Item: item, Token: tok, DelayMs: rapid.Int64Range(0, 3000).Draw(t, "nackdelay")}}
	case 9:
		q, item, tok := pickToken()
		c.Op = &statev1.Command_QueueExtend{QueueExtend: &statev1.QueueExtend{Queue: q, Item: item, Token: tok, VisibilityMs: rapid.SampledFrom([]int64{2000, 0}).Draw(t, "extvis")}}
	case 10:
		_, _, tok := pickToken()
		c.Op = &statev1.Command_ExpireClaim{ExpireClaim: &statev1.ExpireClaim{Token: tok, Term: rapid.Uint64Range(0, 3).Draw(t, "term")}}
	case 11:
		c.Op = &statev1.Command_NewLeader{NewLeader: &statev1.NewLeader{Term: rapid.Uint64Range(0, 3).Draw(t, "term")}}
	case 12:
		c.Op = &statev1.Command_QueueTick{QueueTick: &statev1.QueueTick{}}
	case 13:
		c.Op = &statev1.Command_QueueCancelWait{QueueCancelWait: &statev1.QueueCancelWait{Session: sid, Queue: name, Seq: r.seqs[sid]}}
	}
	return c
}

// drawPush draws a push to queue name: now and then with a dedupe key, a
// delay, or a payload above its limit.
func (r *queueRun) drawPush(name string) *statev1.QueuePush {
	t := r.t
	p := &statev1.QueuePush{Queue: name, Payload: []byte(fmt.Sprint(r.now)), MaxDeliveries: r.maxDel, DedupeWindow: 3, MaxPayloadBytes: 16,
		MaxItems: rapid.SampledFrom([]uint64{0, 6}).Draw(t, "maxitems")}
	if rapid.IntRange(0, 3).Draw(t, "dedupe") == 0 {
		p.DedupeKey = rapid.SampledFrom([]string{"k1", "k2", "k3", "k4"}).Draw(t, "key")
	}
	if rapid.IntRange(0, 3).Draw(t, "delayed") == 0 {
		p.DelayMs = rapid.Int64Range(0, 5000).Draw(t, "delay")
	}
	if rapid.IntRange(0, 15).Draw(t, "bigpayload") == 0 {
		p.Payload = make([]byte, 17)
	}
	return p
}

// drawAcks draws acks of queue name's items: at times every live claim of
// the queue (a batch worker acking what it holds), else 0 to 4 with live,
// stale, repeated or bad tokens.
func (r *queueRun) drawAcks(name string, pick func() (string, uint64, uint64)) []*statev1.QueueItemToken {
	t := r.t
	var acks []*statev1.QueueItemToken
	if rapid.IntRange(0, 3).Draw(t, "ackall") == 0 {
		for _, it := range r.m.QueueItems(name, 0, 1<<20) {
			if it.Claimed {
				acks = append(acks, &statev1.QueueItemToken{Item: it.Item, Token: uint64(it.Grant.Token)})
			}
		}
		return acks[:min(len(acks), fsm.MaxQueueBatch)]
	}
	for range rapid.IntRange(0, 4).Draw(t, "acks") {
		_, item, tok := pick()
		if len(acks) > 0 && rapid.IntRange(0, 5).Draw(t, "ackagain") == 0 {
			item, tok = acks[0].Item, acks[0].Token
		}
		acks = append(acks, &statev1.QueueItemToken{Item: item, Token: tok})
	}
	return acks
}

// ackRef is one ack a command presents: the item's scope and the token.
type ackRef struct {
	scope string
	token fence.Token
}

// acksOf returns the acks cmd presents (a claim's or an ack batch's).
func acksOf(cmd *statev1.Command) []ackRef {
	var queue string
	var list []*statev1.QueueItemToken
	switch {
	case cmd.GetQueueClaim() != nil:
		cl := cmd.GetQueueClaim()
		queue, list = cl.GetQueue(), cl.GetAcks()
		if cl.GetAckItem() != 0 {
			list = []*statev1.QueueItemToken{{Item: cl.GetAckItem(), Token: cl.GetAckToken()}}
		}
	case cmd.GetQueueAckBatch() != nil:
		queue, list = cmd.GetQueueAckBatch().GetQueue(), cmd.GetQueueAckBatch().GetAcks()
	}
	out := make([]ackRef, len(list))
	for i, a := range list {
		out[i] = ackRef{fsm.ClaimScope(queue, a.GetItem()), fence.Token(a.GetToken())}
	}
	return out
}

// ackViolation checks the outcomes of acks against the live claims
// before (liveBefore) and after (liveAfter) the command: an ack is
// accepted only with its item's live claim token, once; a refused one
// leaves its item's live claim as it was. It returns the first violation.
func ackViolation(acks []ackRef, outcomes []fsm.AckOutcome, liveBefore, liveAfter map[string]fence.Token) error {
	if len(outcomes) != len(acks) {
		return fmt.Errorf("%d acks answered %d outcomes", len(acks), len(outcomes))
	}
	done, acked := map[string]bool{}, map[string]bool{}
	for i, a := range acks {
		acked[a.scope] = acked[a.scope] || outcomes[i] == fsm.AckAcked
	}
	for i, a := range acks {
		tok, live := liveBefore[a.scope]
		switch {
		case outcomes[i] == fsm.AckAcked && (!live || tok != a.token || done[a.scope]):
			return fmt.Errorf("ack %d of %s with token %d accepted; the live claim was %d (%v, acked before in the batch: %v)", i, a.scope, a.token, tok, live, done[a.scope])
		case outcomes[i] == fsm.AckAcked:
			done[a.scope] = true
		case live && !acked[a.scope] && liveAfter[a.scope] != tok:
			return fmt.Errorf("refused ack %d (%v) of %s with token %d ended its live claim %d", i, outcomes[i], a.scope, a.token, tok)
		}
	}
	return nil
}

// TestQueue_Properties applies random push, claim, ack, nack, extend,
// claim expiry, session end, new leader and tick commands, with stale
// tokens and retries among them, and checks on every step: an item is
// claimed by at most one live claim; claim tokens strictly increase; no
// acked item is delivered again; a claim takes the oldest available item;
// an item is dead-lettered after exactly max_deliveries deliveries and not
// before; a claim does not take an item ahead of claims waiting on its
// queue; a refused command changes nothing; the queues' time never goes
// backwards; and snapshot -> restore -> replay of the rest gives the same
// state as applying everything; and, draining the queues at the end, that
// every item enqueued was acked or dead-lettered (none lost).
func TestQueue_Properties(t *testing.T) {
	var stats struct{ applied, refused, claims, acks, dead int }
	defer func() {
		t.Logf("applied %d commands, %d refused, %d immediate claims, %d acks, %d dead-lettered", stats.applied, stats.refused, stats.claims, stats.acks, stats.dead)
	}()
	rapid.Check(t, func(t *rapid.T) {
		c := newQueueChecker(t)
		m := fsm.New(c)
		c.m = m
		m.Apply(initCommand(0))
		r := &queueRun{t: t, m: m, c: c, now: 1_000_000, seqs: map[uint64]uint64{}, claimAcks: map[[2]uint64][]fsm.AckOutcome{}, maxDel: uint32(rapid.IntRange(1, 3).Draw(t, "maxdel"))}
		n := rapid.IntRange(1, 250).Draw(t, "n")
		cut := rapid.IntRange(0, n).Draw(t, "cut")
		var snap []byte
		var rest []*statev1.Command
		var clock int64
		var pushed []string // every item enqueued (not a duplicate)
		for i := 0; i < n; i++ {
			if i == cut {
				snap = mustSnapshot(t, m)
			}
			cmd := r.draw()
			if i >= cut {
				rest = append(rest, cmd)
			}
			before := mustSnapshot(t, m)
			var ackScope, heldScope string
			var presented fence.Token
			if a := cmd.GetQueueAck(); a != nil {
				ackScope = fsm.ClaimScope(a.GetQueue(), a.GetItem())
				heldScope, presented = ackScope, fence.Token(a.GetToken())
			}
			if a := cmd.GetQueueNack(); a != nil {
				heldScope, presented = fsm.ClaimScope(a.GetQueue(), a.GetItem()), fence.Token(a.GetToken())
			}
			if a := cmd.GetQueueExtend(); a != nil {
				heldScope, presented = fsm.ClaimScope(a.GetQueue(), a.GetItem()), fence.Token(a.GetToken())
			}
			liveBefore, wasLive := c.live[heldScope]
			lives := maps.Clone(c.live)
			lastBefore := m.LastToken()
			res := m.Apply(cmd)
			if cl := cmd.GetQueueClaim(); cl != nil && res.Err == nil {
				r.checkClaimAcks(cl, cmd, res, before, lives)
			}
			if cmd.GetQueueAckBatch() != nil && res.Err == nil {
				acks := acksOf(cmd)
				if err := ackViolation(acks, res.Queue.Acks, lives, c.live); err != nil {
					t.Fatalf("ack batch: %v", err)
				}
				for i, a := range acks {
					if res.Queue.Acks[i] == fsm.AckAcked {
						c.acked[a.scope] = true
						stats.acks++
					}
				}
			}
			// A batch claim's tokens increase, each above every earlier
			// token, and it gets at most max_items items.
			if cl := cmd.GetQueueClaim(); cl != nil && res.Granted && res.Grant.Token > lastBefore {
				prev := lastBefore
				for _, ci := range res.Queue.Claims {
					if ci.Grant.Token <= prev {
						t.Fatalf("batch claim tokens %v: %d is not above %d", claimTokens(res.Queue.Claims), ci.Grant.Token, prev)
					}
					prev = ci.Grant.Token
				}
				if len(res.Queue.Claims) == 0 || len(res.Queue.Claims) > max(int(cl.GetMaxItems()), 1) {
					t.Fatalf("a claim of up to %d items got %d", cl.GetMaxItems(), len(res.Queue.Claims))
				}
			}
			// Waiting claims are served in arrival order: a claim is
			// granted an item directly only once every claim that waited
			// on that queue before it was served.
			if cl := cmd.GetQueueClaim(); cl != nil && res.Granted && res.Grant.Token > lastBefore {
				if st := m.Queue(cl.GetQueue()); st.Waiters > 0 {
					t.Fatalf("claim of %s granted while %d earlier claims still wait on %s", res.Grant.Scope, st.Waiters, cl.GetQueue())
				}
			}
			// Only the item's current claim token may ack, nack or extend.
			if heldScope != "" && res.Err == nil && (!wasLive || liveBefore != presented) {
				t.Fatalf("%T of %s with token %d accepted; the live claim was %d (%v)", cmd.GetOp(), heldScope, presented, liveBefore, wasLive)
			}
			stats.applied++
			if res.Err != nil {
				stats.refused++
			}
			if res.Session > r.lastSid {
				r.lastSid = res.Session
			}
			if res.Granted && res.Grant.Kind == fence.KindClaim {
				stats.claims++
				r.tokens = append(r.tokens, res.Grant.Token)
			}
			for tok := range c.scopeOf {
				if !containsToken(r.tokens, tok) {
					r.tokens = append(r.tokens, tok)
				}
			}
			if res.Err != nil {
				if after := mustSnapshot(t, m); !bytes.Equal(before, after) {
					t.Fatalf("refused %T (%v) changed the state", cmd.GetOp(), res.Err)
				}
			}
			if ackScope != "" && res.Err == nil {
				c.acked[ackScope] = true
				stats.acks++
			}
			for _, name := range queueNames {
				if st := m.Queue(name); st.Clock < clock {
					t.Fatalf("queue time went back from %d to %d", clock, st.Clock)
				} else {
					clock = st.Clock
				}
			}
			r.checkDeliveries()
			r.log = append(r.log, cmd)
			if cmd.GetQueuePush() != nil && res.Err == nil && !res.Queue.Duplicate {
				pushed = append(pushed, fsm.ClaimScope(cmd.GetQueuePush().GetQueue(), res.Queue.Item))
			}
			if b := cmd.GetQueuePushBatch(); b != nil && res.Err == nil {
				if len(res.Queue.Pushed) != len(b.GetPushes()) {
					t.Fatalf("a push batch of %d answered %d", len(b.GetPushes()), len(res.Queue.Pushed))
				}
				for _, p := range res.Queue.Pushed {
					if !p.Duplicate {
						pushed = append(pushed, fsm.ClaimScope(b.GetPushes()[0].GetQueue(), p.Item))
					}
				}
			}
		}
		for _, name := range queueNames {
			stats.dead += len(m.QueueItems(name+fsm.DeadLetterSuffix, 0, 1<<20))
		}
		if snap == nil {
			snap = mustSnapshot(t, m)
		}
		restored := fsm.New(nil)
		if err := restored.Restore(snap); err != nil {
			t.Fatalf("Restore: %v", err)
		}
		for _, cmd := range rest {
			restored.Apply(cmd)
		}
		want := mustSnapshot(t, m)
		if got := mustSnapshot(t, restored); !bytes.Equal(got, want) {
			t.Fatalf("snapshot at %d, restore and replay of %d commands gave a different state", cut, len(rest))
		}
		replayed := fsm.New(nil)
		replayed.Apply(initCommand(0))
		for _, cmd := range r.log {
			replayed.Apply(cmd)
		}
		if got := mustSnapshot(t, replayed); !bytes.Equal(got, want) {
			t.Fatalf("replaying the whole log gave a different state")
		}
		r.drain(pushed)
	})
}

// checkClaimAcks checks the acks a claim carried (ack-and-claim-next,
// one or several): a retried request answers the first outcomes and
// changes nothing (no second ack); otherwise each ack is accepted only
// with its item's live claim token, and a refused one leaves the item's
// claim as it was (ackViolation).
func (r *queueRun) checkClaimAcks(cl *statev1.QueueClaim, cmd *statev1.Command, res fsm.Result, before []byte, lives map[string]fence.Token) {
	t, c := r.t, r.c
	key := [2]uint64{res.Session, cl.GetSeq()}
	if first, seen := r.claimAcks[key]; seen {
		// A retry is told the first outcome of each ack it carries (an ack
		// the first request did not carry: none).
		for i, o := range res.Queue.Acks {
			want := fsm.AckNone
			if i < len(first) {
				want = first[i]
			}
			if o != want {
				t.Fatalf("retried claim %v answered acks %v; its first answer was %v", key, res.Queue.Acks, first)
			}
		}
		if !bytes.Equal(before, mustSnapshot(t, r.m)) {
			t.Fatalf("retried claim %v (acks %v) changed the state", key, acksOf(cmd))
		}
		return
	}
	r.claimAcks[key] = res.Queue.Acks
	acks := acksOf(cmd)
	if res.Queue.Ack != firstOutcome(res.Queue.Acks) {
		t.Fatalf("claim answered ack %v but acks %v", res.Queue.Ack, res.Queue.Acks)
	}
	if err := ackViolation(acks, res.Queue.Acks, lives, c.live); err != nil {
		t.Fatalf("claim's acks: %v", err)
	}
	for i, a := range acks {
		if res.Queue.Acks[i] == fsm.AckAcked {
			c.acked[a.scope] = true
		}
	}
}

func firstOutcome(o []fsm.AckOutcome) fsm.AckOutcome {
	if len(o) == 0 {
		return fsm.AckNone
	}
	return o[0]
}

func claimTokens(cs []fsm.ClaimInfo) []fence.Token {
	out := make([]fence.Token, len(cs))
	for i, c := range cs {
		out[i] = c.Grant.Token
	}
	return out
}

// drain moves time past every delay and visibility timeout and ticks, as
// the leader does when QueueDue, which hands waiting claims what became
// available; it ends every claim by expiry (an expiry hands the item to the
// next waiting claim, so until none is left), then claims every item until
// none is left, acking or nacking each at random, and checks that every
// item ever enqueued was acked or dead-lettered: none is lost.
func (r *queueRun) drain(pushed []string) {
	t, m := r.t, r.m
	r.now += (13 * time.Hour).Milliseconds() // past every delay and visibility
	m.Apply(&statev1.Command{NowUnixMs: r.now, Op: &statev1.Command_QueueTick{QueueTick: &statev1.QueueTick{}}})
	for claims := m.Claims(); len(claims) > 0; claims = m.Claims() {
		for _, cl := range claims {
			m.Apply(&statev1.Command{NowUnixMs: r.now, Op: &statev1.Command_ExpireClaim{ExpireClaim: &statev1.ExpireClaim{Token: uint64(cl.Token), Term: m.LeaderTerm()}}})
		}
	}
	sid := m.Apply(&statev1.Command{Op: &statev1.Command_CreateSession{CreateSession: &statev1.CreateSession{TtlMs: 1000}}}).Session
	for seq, progress := uint64(1), true; progress; {
		progress = false
		for _, name := range queueNames {
			res := m.Apply(&statev1.Command{NowUnixMs: r.now, Op: &statev1.Command_QueueClaim{QueueClaim: &statev1.QueueClaim{Session: sid, Seq: seq, Queue: name, VisibilityMs: 1000}}})
			seq++
			if !res.Granted {
				continue
			}
			progress = true
			ci := res.Queue.Claim
			if rapid.Bool().Draw(t, "drainack") {
				if res := m.Apply(&statev1.Command{NowUnixMs: r.now, Op: &statev1.Command_QueueAck{QueueAck: &statev1.QueueAck{Queue: name, Item: ci.Item, Token: uint64(ci.Grant.Token)}}}); res.Err != nil {
					t.Fatalf("drain: ack %s: %v", fsm.ClaimScope(name, ci.Item), res.Err)
				}
				r.c.acked[fsm.ClaimScope(name, ci.Item)] = true
			} else if res := m.Apply(&statev1.Command{NowUnixMs: r.now, Op: &statev1.Command_QueueNack{QueueNack: &statev1.QueueNack{Queue: name, Item: ci.Item, Token: uint64(ci.Grant.Token)}}}); res.Err != nil {
				t.Fatalf("drain: nack %s: %v", fsm.ClaimScope(name, ci.Item), res.Err)
			}
		}
	}
	dead := map[string]bool{}
	for _, name := range queueNames {
		if st := m.Queue(name); st.Available+st.Delayed+st.Claimed != 0 {
			t.Fatalf("drain left items in %s: %+v", name, st)
		}
		for _, it := range m.QueueItems(name+fsm.DeadLetterSuffix, 0, 1<<20) {
			dead[fsm.ClaimScope(name, it.OriginItem)] = true
		}
	}
	for _, scope := range pushed {
		if !r.c.acked[scope] && !dead[scope] {
			t.Fatalf("item %s was enqueued but neither acked nor dead-lettered: lost", scope)
		}
	}
}

func containsToken(list []fence.Token, tok fence.Token) bool {
	for _, v := range list {
		if v == tok {
			return true
		}
	}
	return false
}

// checkDeliveries compares every item's delivery count with the claims
// the checker saw, and checks the dead-letter rule: an unclaimed item has
// had fewer than max_deliveries deliveries, and every item in a
// dead-letter queue had exactly max_deliveries.
func (r *queueRun) checkDeliveries() {
	for _, name := range queueNames {
		for _, it := range r.m.QueueItems(name, 0, 1<<20) {
			seen := r.c.deliveries[fsm.ClaimScope(name, it.Item)]
			if it.Deliveries != seen {
				r.t.Fatalf("item %s counts %d deliveries, %d claims were granted", fsm.ClaimScope(name, it.Item), it.Deliveries, seen)
			}
			if !it.Claimed && it.Deliveries >= r.maxDel {
				r.t.Fatalf("item %s was delivered %d times (limit %d) and is back in its queue", fsm.ClaimScope(name, it.Item), it.Deliveries, r.maxDel)
			}
		}
		for _, it := range r.m.QueueItems(name+fsm.DeadLetterSuffix, 0, 1<<20) {
			if it.OriginItem == 0 {
				continue // pushed to the dead-letter queue directly
			}
			if seen := r.c.deliveries[fsm.ClaimScope(name, it.OriginItem)]; seen != r.maxDel {
				r.t.Fatalf("item %s was dead-lettered after %d deliveries, want exactly %d", fsm.ClaimScope(name, it.OriginItem), seen, r.maxDel)
			}
		}
	}
}
