package fsm_test

import (
	"bytes"
	"fmt"
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

func (c *queueChecker) Released(k fence.Kind, name string, session uint64, tok fence.Token, _ fsm.EndReason) {
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
	// claimAcks is the ack outcome of every claim answered, by request.
	claimAcks map[[2]uint64]fsm.AckOutcome
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
	switch rapid.IntRange(0, 13).Draw(t, "op") {
	case 0:
		c.Op = &statev1.Command_CreateSession{CreateSession: &statev1.CreateSession{TtlMs: 1000}}
	case 1:
		if rapid.Bool().Draw(t, "close") {
			c.Op = &statev1.Command_CloseSession{CloseSession: &statev1.CloseSession{Session: sid}}
		} else {
			c.Op = &statev1.Command_ExpireSession{ExpireSession: &statev1.ExpireSession{Session: sid, Term: rapid.Uint64Range(0, 3).Draw(t, "term")}}
		}
	case 2, 3:
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
		c.Op = &statev1.Command_QueuePush{QueuePush: p}
	case 4, 5, 6:
		r.seqs[sid]++
		seq := r.seqs[sid]
		if rapid.IntRange(0, 5).Draw(t, "retry") == 0 && seq > 1 {
			seq = rapid.Uint64Range(1, seq-1).Draw(t, "oldseq")
		}
		vis := rapid.SampledFrom([]int64{1000, 5000, 99, 12*3600*1000 + 1}).Draw(t, "vis")
		cl := &statev1.QueueClaim{Session: sid, Seq: seq, Queue: name, VisibilityMs: vis, Wait: rapid.Bool().Draw(t, "wait")}
		if rapid.Bool().Draw(t, "ackwithclaim") {
			// Ack-and-claim-next, with a live, stale, foreign or bad token.
			_, cl.AckItem, cl.AckToken = pickToken()
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
	default:
		c.Op = &statev1.Command_QueueCancelWait{QueueCancelWait: &statev1.QueueCancelWait{Session: sid, Queue: name, Seq: r.seqs[sid]}}
	}
	return c
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
		r := &queueRun{t: t, m: m, c: c, now: 1_000_000, seqs: map[uint64]uint64{}, claimAcks: map[[2]uint64]fsm.AckOutcome{}, maxDel: uint32(rapid.IntRange(1, 3).Draw(t, "maxdel"))}
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
			var claimAckScope string
			if cl := cmd.GetQueueClaim(); cl != nil && cl.GetAckItem() != 0 {
				claimAckScope, presented = fsm.ClaimScope(cl.GetQueue(), cl.GetAckItem()), fence.Token(cl.GetAckToken())
			}
			liveBefore, wasLive := c.live[heldScope+claimAckScope]
			lastBefore := m.LastToken()
			res := m.Apply(cmd)
			if cl := cmd.GetQueueClaim(); cl != nil && res.Err == nil {
				r.checkClaimAck(cl, res, before, claimAckScope, presented, liveBefore, wasLive)
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

// checkClaimAck checks the ack a claim carried (ack-and-claim-next): a
// retried request answers the first outcome and changes nothing (no
// second ack); otherwise an ack is accepted only with the item's live
// claim token, and a refused one leaves the item's claim as it was.
func (r *queueRun) checkClaimAck(cl *statev1.QueueClaim, res fsm.Result, before []byte, scope string, presented, liveBefore fence.Token, wasLive bool) {
	t, c := r.t, r.c
	key := [2]uint64{res.Session, cl.GetSeq()}
	if first, seen := r.claimAcks[key]; seen {
		if res.Queue.Ack != first {
			t.Fatalf("retried claim %v answered ack %v; its first answer was %v", key, res.Queue.Ack, first)
		}
		if !bytes.Equal(before, mustSnapshot(t, r.m)) {
			t.Fatalf("retried claim %v (ack %s token %d) changed the state", key, scope, presented)
		}
		return
	}
	r.claimAcks[key] = res.Queue.Ack
	switch {
	case scope == "" && res.Queue.Ack != fsm.AckNone:
		t.Fatalf("a claim without an ack answered ack %v", res.Queue.Ack)
	case res.Queue.Ack == fsm.AckAcked:
		if !wasLive || liveBefore != presented {
			t.Fatalf("claim's ack of %s with token %d accepted; the live claim was %d (%v)", scope, presented, liveBefore, wasLive)
		}
		c.acked[scope] = true
	case scope != "" && wasLive && c.live[scope] != liveBefore:
		t.Fatalf("claim's refused ack (%v) of %s with token %d ended its live claim %d", res.Queue.Ack, scope, presented, liveBefore)
	}
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
