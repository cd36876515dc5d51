package fsm_test

import (
	"bytes"
	"errors"
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// ackClaimQ is a claim that acks item with tok first (ack-and-claim-next).
func ackClaimQ(m *fsm.Machine, now int64, sid, seq uint64, queue string, visMs int64, wait bool, item uint64, tok fence.Token) fsm.Result {
	return m.Apply(&statev1.Command{NowUnixMs: now, Op: &statev1.Command_QueueClaim{QueueClaim: &statev1.QueueClaim{
		Session: sid, Seq: seq, Queue: queue, VisibilityMs: visMs, Wait: wait, AckItem: item, AckToken: uint64(tok)}}})
}

// TestQueue_AckWithClaim: a claim carrying the worker's ack acks the item
// and claims the next in one command, and a retry of it answers the same
// (the same claim, "acked") without a second ack or claim.
func TestQueue_AckWithClaim(t *testing.T) {
	m := newMachine(t)
	a := createSession(t, m)
	for _, p := range []string{"one", "two", "three"} {
		push(m, 1000, &statev1.QueuePush{Queue: "q", Payload: []byte(p)})
	}
	first := claimQ(m, 1000, a, 1, "q", 5000, false)
	next := ackClaimQ(m, 1100, a, 2, "q", 5000, false, 1, first.Grant.Token)
	if next.Err != nil || !next.Granted || next.Queue.Claim.Item != 2 || next.Queue.Ack != fsm.AckAcked || next.Grant.Token <= first.Grant.Token {
		t.Fatalf("ack-and-claim-next: %+v", next)
	}
	if _, ok := m.Claim(first.Grant.Token); ok {
		t.Fatal("the acked claim is still live")
	}
	if items := m.QueueItems("q", 0, 10); len(items) != 2 || items[0].Item != 2 || items[1].Item != 3 {
		t.Fatalf("items after the ack: %+v, want 2 and 3", items)
	}
	before := mustSnapshot(t, m)
	retry := ackClaimQ(m, 1200, a, 2, "q", 5000, false, 1, first.Grant.Token)
	if retry.Err != nil || !retry.Granted || retry.Grant.Token != next.Grant.Token || retry.Queue.Claim.Item != 2 || retry.Queue.Ack != fsm.AckAcked {
		t.Fatalf("retried ack-and-claim-next: %+v, want claim %d and acked", retry, next.Grant.Token)
	}
	if !bytes.Equal(before, mustSnapshot(t, m)) {
		t.Fatal("a retried ack-and-claim-next changed the state")
	}
	// The last item: the ack goes through, the claim finds nothing.
	last := ackClaimQ(m, 1300, a, 3, "q", 5000, false, 2, next.Grant.Token)
	third := ackClaimQ(m, 1300, a, 4, "q", 5000, false, 3, last.Grant.Token)
	if third.Err != nil || third.Granted || third.Queue.Ack != fsm.AckAcked || m.QueueItemCount() != 0 {
		t.Fatalf("ack of the last item with a claim: %+v, %d items left", third, m.QueueItemCount())
	}
}

// TestQueue_AckWithClaimStaleChangesNothing: the order-queue story with
// ack-and-claim-next. A worker whose claim expired and was taken by
// another presents its old token in its next claim: the ack is refused as
// stale, the item stays claimed by its real holder, and the claim goes on
// as a plain claim would. A foreign token (another item's) and an item
// never pushed are refused alike.
func TestQueue_AckWithClaimStaleChangesNothing(t *testing.T) {
	m := newMachine(t)
	a, b := createSession(t, m), createSession(t, m)
	for _, p := range []string{"one", "two", "three"} {
		push(m, 1000, &statev1.QueuePush{Queue: "q", Payload: []byte(p)})
	}
	old := claimQ(m, 1000, a, 1, "q", 1000, false)
	expireClaim(m, 2100, old.Grant.Token, 0)
	real := claimQ(m, 2200, b, 1, "q", 5000, false)
	if real.Queue.Claim.Item != 1 {
		t.Fatalf("b's claim: %+v", real)
	}
	// The same state, on a twin that gets a plain claim.
	twin := fsm.New(nil)
	if err := twin.Restore(mustSnapshot(t, m)); err != nil {
		t.Fatal(err)
	}
	res := ackClaimQ(m, 2300, a, 2, "q", 5000, false, 1, old.Grant.Token)
	plain := claimQ(twin, 2300, a, 2, "q", 5000, false)
	if res.Err != nil || res.Queue.Ack != fsm.AckStale {
		t.Fatalf("claim with a stale ack: %+v, want the ack stale", res)
	}
	if res.Granted != plain.Granted || res.Grant != plain.Grant || res.Queue.Claim.Item != plain.Queue.Claim.Item || res.Queue.Claim.Item != 2 {
		t.Fatalf("claim with a stale ack got %+v; a plain claim got %+v", res, plain)
	}
	if ci, ok := m.Claim(real.Grant.Token); !ok || ci.Item != 1 || ci.Grant.Session != b {
		t.Fatalf("item 1 after a stale ack: %+v %v, want still claimed by session %d", ci, ok, b)
	}
	if m.Queue("q") != twin.Queue("q") || m.LastToken() != twin.LastToken() {
		t.Fatalf("queue after a stale ack %+v, after a plain claim %+v", m.Queue("q"), twin.Queue("q"))
	}
	// A foreign token: b's claim of item 1 presented for item 2.
	foreign := ackClaimQ(m, 2400, a, 3, "q", 5000, false, 2, real.Grant.Token)
	if foreign.Err != nil || foreign.Queue.Ack != fsm.AckStale || !foreign.Granted || foreign.Queue.Claim.Item != 3 {
		t.Fatalf("claim with a foreign token's ack: %+v", foreign)
	}
	if ci, ok := m.Claim(res.Grant.Token); !ok || ci.Item != 2 {
		t.Fatalf("item 2 after a foreign ack: %+v %v, want still claimed", ci, ok)
	}
	if _, ok := m.Claim(real.Grant.Token); !ok {
		t.Fatal("a foreign ack ended the claim whose token it presented")
	}
	// An item the queue never had: not found, nothing changes; the claim
	// finds no item.
	nf := ackClaimQ(m, 2500, a, 4, "q", 5000, false, 99, res.Grant.Token)
	if nf.Err != nil || nf.Queue.Ack != fsm.AckNotFound || nf.Granted {
		t.Fatalf("claim with an unknown item's ack: %+v", nf)
	}
	if st := m.Queue("q"); st.Claimed != 3 {
		t.Fatalf("after the refused acks %d items are claimed, want 3", st.Claimed)
	}
	// A retry answers its first outcome again.
	if again := ackClaimQ(m, 2600, a, 2, "q", 5000, false, 1, old.Grant.Token); again.Queue.Ack != fsm.AckStale || again.Grant != res.Grant {
		t.Fatalf("retried claim with a stale ack: %+v", again)
	}
}

// TestQueue_AckWithClaimBadInput: an ack with an item but no token, or a
// token but no item, refuses the whole command and changes nothing.
func TestQueue_AckWithClaimBadInput(t *testing.T) {
	m := newMachine(t)
	a := createSession(t, m)
	push(m, 1000, &statev1.QueuePush{Queue: "q", Payload: []byte("x")})
	c := claimQ(m, 1000, a, 1, "q", 5000, false)
	push(m, 1000, &statev1.QueuePush{Queue: "q", Payload: []byte("y")})
	before := mustSnapshot(t, m)
	for _, bad := range [][2]uint64{{1, 0}, {0, uint64(c.Grant.Token)}} {
		res := ackClaimQ(m, 1100, a, 2, "q", 5000, false, bad[0], fence.Token(bad[1]))
		if !errors.Is(res.Err, fence.ErrInvalidArgument) {
			t.Fatalf("ack item %d token %d: %v, want invalid argument", bad[0], bad[1], res.Err)
		}
	}
	// A bad visibility refuses the claim, and the valid ack with it.
	if res := ackClaimQ(m, 1100, a, 3, "q", 1, false, 1, c.Grant.Token); !errors.Is(res.Err, fence.ErrInvalidArgument) {
		t.Fatalf("claim with a bad visibility: %v", res.Err)
	}
	if !bytes.Equal(before, mustSnapshot(t, m)) {
		t.Fatal("a refused claim with an ack changed the state")
	}
}

// TestQueue_AckWithWaitingClaim: the ack goes through at once even when
// the claim then waits; the claim is pushed an item later, and a retry
// still answers "acked".
func TestQueue_AckWithWaitingClaim(t *testing.T) {
	m := newMachine(t)
	a := createSession(t, m)
	push(m, 1000, &statev1.QueuePush{Queue: "q", Payload: []byte("x")})
	c := claimQ(m, 1000, a, 1, "q", 5000, false)
	w := ackClaimQ(m, 1100, a, 2, "q", 5000, true, 1, c.Grant.Token)
	if w.Err != nil || !w.Queued || w.Queue.Ack != fsm.AckAcked || m.QueueItemCount() != 0 {
		t.Fatalf("waiting claim with an ack: %+v", w)
	}
	push(m, 1200, &statev1.QueuePush{Queue: "q", Payload: []byte("y")})
	got := ackClaimQ(m, 1300, a, 2, "q", 5000, true, 1, c.Grant.Token)
	if got.Err != nil || !got.Granted || got.Queue.Claim.Item != 2 || got.Queue.Ack != fsm.AckAcked {
		t.Fatalf("retry after the push: %+v, want item 2 and acked", got)
	}
	// The outcome survives a snapshot.
	r := fsm.New(nil)
	if err := r.Restore(mustSnapshot(t, m)); err != nil {
		t.Fatal(err)
	}
	if again := ackClaimQ(r, 1400, a, 2, "q", 5000, true, 1, c.Grant.Token); again.Queue.Ack != fsm.AckAcked || again.Grant != got.Grant {
		t.Fatalf("retry after a restore: %+v", again)
	}
}

// TestQueue_AckWithClaimQuota: an owner at its max_held limit can ack its
// claim and claim the next item in one command (the ack frees the hold
// first), but a stale ack frees nothing: that claim is refused whole, and
// changes nothing.
func TestQueue_AckWithClaimQuota(t *testing.T) {
	m := newMachine(t)
	q := &statev1.Quota{Owner: "10.0.0.1", MaxSessions: 2, MaxHeld: 1, MaxWaiting: 1}
	s := ownedSession(m, q).Session
	for _, p := range []string{"one", "two", "three"} {
		push(m, 1000, &statev1.QueuePush{Queue: "q", Payload: []byte(p)})
	}
	claim := func(seq, item uint64, tok fence.Token) fsm.Result {
		return m.Apply(&statev1.Command{NowUnixMs: 1100, Op: &statev1.Command_QueueClaim{QueueClaim: &statev1.QueueClaim{
			Session: s, Seq: seq, Queue: "q", VisibilityMs: 5000, AckItem: item, AckToken: uint64(tok), Quota: q}}})
	}
	first := claim(1, 0, 0)
	if !first.Granted {
		t.Fatalf("first claim: %+v", first)
	}
	wantQuotaError(t, claim(2, 0, 0), fsm.QuotaHeld)
	next := claim(3, 1, first.Grant.Token)
	if next.Err != nil || !next.Granted || next.Queue.Ack != fsm.AckAcked || next.Queue.Claim.Item != 2 {
		t.Fatalf("ack-and-claim-next at the limit: %+v", next)
	}
	before := mustSnapshot(t, m)
	wantQuotaError(t, claim(4, 1, first.Grant.Token), fsm.QuotaHeld)
	if !bytes.Equal(before, mustSnapshot(t, m)) {
		t.Fatal("a claim refused by the quota changed the state")
	}
}

// TestQueue_AckWithClaimTokenRange: an ack token outside 1..MaxToken is
// bad input: the whole claim is refused with fence.ErrInvalidToken and
// changes nothing (it is not an ack of an item the queue "never had", and
// the claim does not go on). MaxToken itself is a valid token that claims
// nothing here, so its ack is stale.
func TestQueue_AckWithClaimTokenRange(t *testing.T) {
	m := newMachine(t)
	a := createSession(t, m)
	push(m, 1000, &statev1.QueuePush{Queue: "q", Payload: []byte("x")})
	push(m, 1000, &statev1.QueuePush{Queue: "q", Payload: []byte("y")})
	c := claimQ(m, 1000, a, 1, "q", 5000, false)
	before := mustSnapshot(t, m)
	for _, tok := range []fence.Token{fence.MaxToken + 1, 1<<64 - 1} {
		res := ackClaimQ(m, 1100, a, 2, "q", 5000, false, 1, tok)
		if !errors.Is(res.Err, fence.ErrInvalidToken) || res.Granted {
			t.Fatalf("ack token %d: %+v, want refused as an invalid token", uint64(tok), res)
		}
	}
	if !bytes.Equal(before, mustSnapshot(t, m)) {
		t.Fatal("a claim with an out-of-range ack token changed the state")
	}
	if res := ackClaimQ(m, 1100, a, 3, "q", 5000, false, 1, fence.MaxToken); res.Err != nil || res.Queue.Ack != fsm.AckStale || !res.Granted {
		t.Fatalf("ack token MaxToken: %+v, want stale and item 2 claimed", res)
	}
	if _, ok := m.Claim(c.Grant.Token); !ok {
		t.Fatal("an ack with another token ended the claim")
	}
}

// TestQueue_AckWithClaimOtherQueue: a claim's ack names an item of the
// claim's own queue. The token of a claim in another queue, presented for
// the same item id, is stale there: neither queue's item changes.
func TestQueue_AckWithClaimOtherQueue(t *testing.T) {
	m := newMachine(t)
	a := createSession(t, m)
	push(m, 1000, &statev1.QueuePush{Queue: "a", Payload: []byte("a1")})
	push(m, 1000, &statev1.QueuePush{Queue: "b", Payload: []byte("b1")})
	push(m, 1000, &statev1.QueuePush{Queue: "b", Payload: []byte("b2")})
	ca := claimQ(m, 1000, a, 1, "a", 5000, false)
	cb := claimQ(m, 1000, a, 2, "b", 5000, false)
	res := ackClaimQ(m, 1100, a, 3, "b", 5000, false, 1, ca.Grant.Token)
	if res.Err != nil || res.Queue.Ack != fsm.AckStale || res.Queue.Claim.Item != 2 {
		t.Fatalf("claim of b acking a's claim token for item 1: %+v, want stale and b/2 claimed", res)
	}
	for _, c := range []fsm.Result{ca, cb} {
		if _, ok := m.Claim(c.Grant.Token); !ok {
			t.Fatalf("claim %s ended by an ack of another queue's token", c.Grant.Scope)
		}
	}
}

// TestQueue_AckWithClaimRetryAfterItsClaimEnded: a retry of an
// ack-and-claim-next whose claim has ended since (acked, expired, or
// dead-lettered after its last delivery) is refused as stale and changes
// nothing: it acks nothing again and claims no other item. After the
// session's end a retry finds no session and changes nothing either.
func TestQueue_AckWithClaimRetryAfterItsClaimEnded(t *testing.T) {
	for _, end := range []string{"acked", "expired", "dead-lettered"} {
		m := newMachine(t)
		a := createSession(t, m)
		var maxDel uint32 // expired: the item goes back to the queue
		if end == "dead-lettered" {
			maxDel = 1 // its expiry ends its last delivery
		}
		for _, p := range []string{"one", "two", "three"} {
			push(m, 1000, &statev1.QueuePush{Queue: "q", Payload: []byte(p), MaxDeliveries: maxDel})
		}
		first := claimQ(m, 1000, a, 1, "q", 1000, false)
		next := ackClaimQ(m, 1100, a, 2, "q", 1000, false, 1, first.Grant.Token)
		if !next.Granted || next.Queue.Ack != fsm.AckAcked {
			t.Fatalf("%s: ack-and-claim-next: %+v", end, next)
		}
		switch end {
		case "acked":
			if r := ackQ(m, 1200, "q", next.Queue.Claim.Item, next.Grant.Token); r.Err != nil {
				t.Fatalf("ack: %v", r.Err)
			}
		default:
			if r := expireClaim(m, 2200, next.Grant.Token, 0); r.Err != nil || r.Ignored {
				t.Fatalf("expire: %+v", r)
			}
		}
		if dead := m.QueueItems("q.dead", 0, 10); (len(dead) == 1) != (end == "dead-lettered") {
			t.Fatalf("%s: dead-letter queue %+v", end, dead)
		}
		before := mustSnapshot(t, m)
		retry := ackClaimQ(m, 2300, a, 2, "q", 1000, false, 1, first.Grant.Token)
		if !errors.Is(retry.Err, fence.ErrStaleToken) || retry.Granted {
			t.Fatalf("%s: retry after the claim ended: %+v, want refused as stale", end, retry)
		}
		if !bytes.Equal(before, mustSnapshot(t, m)) {
			t.Fatalf("%s: the retry changed the state", end)
		}
		if r := expire(m, a, 0); r.Err != nil {
			t.Fatalf("%s: expire session: %v", end, r.Err)
		}
		before = mustSnapshot(t, m)
		if r := ackClaimQ(m, 2400, a, 2, "q", 1000, false, 1, first.Grant.Token); !errors.Is(r.Err, fence.ErrSessionNotFound) {
			t.Fatalf("%s: retry after the session's end: %+v, want session not found", end, r)
		}
		if !bytes.Equal(before, mustSnapshot(t, m)) {
			t.Fatalf("%s: the retry after the session's end changed the state", end)
		}
	}
}
