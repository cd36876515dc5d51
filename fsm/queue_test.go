package fsm_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

func push(m *fsm.Machine, now int64, p *statev1.QueuePush) fsm.Result {
	if p.MaxPayloadBytes == 0 {
		p.MaxPayloadBytes = 256 << 10
	}
	if p.DedupeWindow == 0 {
		p.DedupeWindow = 100
	}
	return m.Apply(&statev1.Command{NowUnixMs: now, Op: &statev1.Command_QueuePush{QueuePush: p}})
}

func claimQ(m *fsm.Machine, now int64, sid, seq uint64, queue string, visMs int64, wait bool) fsm.Result {
	return m.Apply(&statev1.Command{NowUnixMs: now, Op: &statev1.Command_QueueClaim{QueueClaim: &statev1.QueueClaim{Session: sid, Seq: seq, Queue: queue, VisibilityMs: visMs, Wait: wait}}})
}

func ackQ(m *fsm.Machine, now int64, queue string, item uint64, tok fence.Token) fsm.Result {
	return m.Apply(&statev1.Command{NowUnixMs: now, Op: &statev1.Command_QueueAck{QueueAck: &statev1.QueueAck{Queue: queue, Item: item, Token: uint64(tok)}}})
}

func expireClaim(m *fsm.Machine, now int64, tok fence.Token, term uint64) fsm.Result {
	return m.Apply(&statev1.Command{NowUnixMs: now, Op: &statev1.Command_ExpireClaim{ExpireClaim: &statev1.ExpireClaim{Token: uint64(tok), Term: term}}})
}

// TestQueue_LateAckAfterExpiryRefused is the order-queue story in the
// state machine: a claim expires, the item is claimed again with a higher
// token, and the first claim's ack, nack and extend are refused as stale
// and change nothing.
func TestQueue_LateAckAfterExpiryRefused(t *testing.T) {
	m := newMachine(t)
	a, b := createSession(t, m), createSession(t, m)
	push(m, 1000, &statev1.QueuePush{Queue: "orders", Payload: []byte("order-1")})
	first := claimQ(m, 1000, a, 1, "orders", 1000, false)
	if !first.Granted || first.Queue.Claim.Item != 1 || first.Grant.Scope != "orders/1" || first.Grant.Kind != fence.KindClaim {
		t.Fatalf("first claim: %+v", first)
	}
	if res := claimQ(m, 1100, b, 1, "orders", 1000, false); res.Granted {
		t.Fatalf("a claimed item was claimed again: %+v", res)
	}
	if res := expireClaim(m, 2100, first.Grant.Token, 0); res.Ignored || res.Err != nil {
		t.Fatalf("expire: %+v", res)
	}
	second := claimQ(m, 2200, b, 2, "orders", 1000, false)
	if !second.Granted || second.Grant.Token <= first.Grant.Token || second.Queue.Claim.Deliveries != 2 {
		t.Fatalf("second claim: %+v (first token %d)", second, first.Grant.Token)
	}
	before := mustSnapshot(t, m)
	for _, cmd := range []*statev1.Command{
		{Op: &statev1.Command_QueueAck{QueueAck: &statev1.QueueAck{Queue: "orders", Item: 1, Token: uint64(first.Grant.Token)}}},
		{Op: &statev1.Command_QueueNack{QueueNack: &statev1.QueueNack{Queue: "orders", Item: 1, Token: uint64(first.Grant.Token)}}},
		{Op: &statev1.Command_QueueExtend{QueueExtend: &statev1.QueueExtend{Queue: "orders", Item: 1, Token: uint64(first.Grant.Token), VisibilityMs: 5000}}},
	} {
		cmd.NowUnixMs = 2300
		res := m.Apply(cmd)
		if !errors.Is(res.Err, fence.ErrStaleToken) || !strings.Contains(res.Err.Error(), "current claim is token") {
			t.Fatalf("%T with the expired claim's token: %v, want a stale-token error", cmd.GetOp(), res.Err)
		}
	}
	if !bytes.Equal(before, mustSnapshot(t, m)) {
		t.Fatal("a stale ack, nack or extend changed the state")
	}
	if res := ackQ(m, 2400, "orders", 1, second.Grant.Token); res.Err != nil {
		t.Fatalf("ack with the current token: %v", res.Err)
	}
	// After the ack even the current token is stale: the item is gone.
	if res := ackQ(m, 2500, "orders", 1, second.Grant.Token); !errors.Is(res.Err, fence.ErrStaleToken) {
		t.Fatalf("second ack: %v, want stale", res.Err)
	}
}

// TestQueue_ExpiryFromOlderTermIgnored: a deposed leader's claim expiry
// changes nothing.
func TestQueue_ExpiryFromOlderTermIgnored(t *testing.T) {
	m := newMachine(t)
	a := createSession(t, m)
	m.Apply(&statev1.Command{Op: &statev1.Command_NewLeader{NewLeader: &statev1.NewLeader{Term: 5}}})
	push(m, 1000, &statev1.QueuePush{Queue: "q", Payload: []byte("x")})
	c := claimQ(m, 1000, a, 1, "q", 1000, false)
	if res := expireClaim(m, 5000, c.Grant.Token, 4); !res.Ignored {
		t.Fatalf("expiry from term 4 after term 5: %+v", res)
	}
	if _, ok := m.Claim(c.Grant.Token); !ok {
		t.Fatal("the claim ended on an expiry from an older term")
	}
}

// TestQueue_DedupeDelayDeadLetterSession covers a retried push, a delayed
// item, the dead-letter queue and claims returned when their session ends.
func TestQueue_DedupeDelayDeadLetterSession(t *testing.T) {
	m := newMachine(t)
	a := createSession(t, m)
	p1 := push(m, 1000, &statev1.QueuePush{Queue: "q", Payload: []byte("one"), DedupeKey: "k", MaxDeliveries: 2})
	p2 := push(m, 1001, &statev1.QueuePush{Queue: "q", Payload: []byte("one again"), DedupeKey: "k", MaxDeliveries: 2})
	if p1.Queue.Item != 1 || p2.Queue.Item != 1 || !p2.Queue.Duplicate || m.Queue("q").Available != 1 {
		t.Fatalf("dedupe: %+v %+v stats %+v", p1.Queue, p2.Queue, m.Queue("q"))
	}
	push(m, 1002, &statev1.QueuePush{Queue: "q", Payload: []byte("later"), DelayMs: 5000})
	c1 := claimQ(m, 1003, a, 1, "q", 1000, false)
	if c1.Queue.Claim.Item != 1 {
		t.Fatalf("claim: %+v", c1.Queue)
	}
	if res := claimQ(m, 1004, a, 2, "q", 1000, false); res.Granted {
		t.Fatalf("the delayed item was claimed before its delay ended: %+v", res.Queue)
	}
	// Session end returns the claim (first delivery).
	m.Apply(&statev1.Command{NowUnixMs: 1005, Op: &statev1.Command_CloseSession{CloseSession: &statev1.CloseSession{Session: a}}})
	if _, ok := m.Claim(c1.Grant.Token); ok || m.Queue("q").Available != 1 {
		t.Fatalf("the closed session's claim is still live: %+v", m.Queue("q"))
	}
	b := createSession(t, m)
	c2 := claimQ(m, 1006, b, 1, "q", 1000, false)
	expireClaim(m, 3000, c2.Grant.Token, 0) // second delivery ends: dead-lettered
	dead := m.QueueItems("q.dead", 0, 10)
	if len(dead) != 1 || dead[0].OriginItem != 1 || string(dead[0].Payload) != "one" {
		t.Fatalf("dead-letter queue: %+v", dead)
	}
	if c := claimQ(m, 6002, b, 2, "q", 1000, false); !c.Granted || c.Queue.Claim.Item != 2 {
		t.Fatalf("the delayed item after its delay: %+v", c)
	}
}

// TestQueue_WaitingClaimPushed: a waiting claim is granted by the push
// that makes an item available, and by a tick once a delay ends.
func TestQueue_WaitingClaimPushed(t *testing.T) {
	m := newMachine(t)
	a := createSession(t, m)
	if res := claimQ(m, 1000, a, 1, "q", 1000, true); !res.Queued {
		t.Fatalf("claim on an empty queue: %+v", res)
	}
	push(m, 1001, &statev1.QueuePush{Queue: "q", Payload: []byte("x"), DelayMs: 1000})
	if ci, live, waiting := m.ClaimOfRequest(a, 1, "q"); live || !waiting {
		t.Fatalf("delayed item granted early: %+v", ci)
	}
	if !m.QueueDue(2001) || m.QueueDue(2000) {
		t.Fatal("QueueDue wrong around the delay's end")
	}
	m.Apply(&statev1.Command{NowUnixMs: 2001, Op: &statev1.Command_QueueTick{QueueTick: &statev1.QueueTick{}}})
	if ci, live, _ := m.ClaimOfRequest(a, 1, "q"); !live || ci.Item != 1 {
		t.Fatalf("tick after the delay did not grant the waiter: %+v", ci)
	}
}

// TestQueue_WaiterServedBeforeLaterClaim: an item whose delay ended, with
// no tick yet to hand it to the claim that waited for it, goes to that
// waiting claim when a later claim arrives, not to the later claim (it
// took the item and left the waiter queued, and its nack then handed the
// item to the waiter: the property test's drain found a claim it never
// saw). With two items ready, the waiter gets the older, the later claim
// the next.
func TestQueue_WaiterServedBeforeLaterClaim(t *testing.T) {
	m := newMachine(t)
	a, b := createSession(t, m), createSession(t, m)
	if res := claimQ(m, 1000, a, 1, "q", 1000, true); !res.Queued {
		t.Fatalf("claim on an empty queue: %+v", res)
	}
	push(m, 1000, &statev1.QueuePush{Queue: "q", Payload: []byte("x"), DelayMs: 1})
	res := claimQ(m, 5000, b, 1, "q", 1000, false)
	if res.Granted {
		t.Fatalf("a later claim took the item the waiting claim was queued for: %+v", res)
	}
	ci, live, waiting := m.ClaimOfRequest(a, 1, "q")
	if !live || waiting || ci.Item != 1 || ci.Grant.Session != a {
		t.Fatalf("the waiting claim was not served: %+v live %v waiting %v", ci, live, waiting)
	}
	if st := m.Queue("q"); st.Claimed != 1 || st.Waiters != 0 || st.Clock != 5000 {
		t.Fatalf("queue after the claim: %+v", st)
	}

	// Two items ready, one waiter: the waiter gets item 2 (the older
	// available one), the later claim item 3.
	if res := ackQ(m, 5000, "q", 1, ci.Grant.Token); res.Err != nil {
		t.Fatalf("ack: %v", res.Err)
	}
	if res := claimQ(m, 5000, a, 2, "q", 1000, true); !res.Queued {
		t.Fatalf("claim on an empty queue: %+v", res)
	}
	push(m, 5000, &statev1.QueuePush{Queue: "q", Payload: []byte("y"), DelayMs: 10})
	push(m, 5000, &statev1.QueuePush{Queue: "q", Payload: []byte("z"), DelayMs: 10})
	res = claimQ(m, 6000, b, 2, "q", 1000, false)
	if !res.Granted || res.Queue.Claim.Item != 3 {
		t.Fatalf("later claim with two items ready: %+v", res)
	}
	if ci, live, _ := m.ClaimOfRequest(a, 2, "q"); !live || ci.Item != 2 || ci.Grant.Token >= res.Grant.Token {
		t.Fatalf("the waiting claim did not get the older item first: %+v (later claim token %d)", ci, res.Grant.Token)
	}
}

// TestQueue_BadInputChangesNothing: every malformed queue command is
// refused with a clear error and leaves the state byte for byte as it was.
func TestQueue_BadInputChangesNothing(t *testing.T) {
	m := newMachine(t)
	a := createSession(t, m)
	push(m, 1000, &statev1.QueuePush{Queue: "q", Payload: []byte("x")})
	c := claimQ(m, 1000, a, 1, "q", 1000, false)
	long := strings.Repeat("n", fence.MaxNameLen-2)
	cases := []struct {
		name string
		cmd  *statev1.Command
		want string
	}{
		{"payload too big", &statev1.Command{Op: &statev1.Command_QueuePush{QueuePush: &statev1.QueuePush{Queue: "q", Payload: make([]byte, 11), MaxPayloadBytes: 10}}}, "above the limit of 10"},
		{"payload above the hard cap", &statev1.Command{Op: &statev1.Command_QueuePush{QueuePush: &statev1.QueuePush{Queue: "q", Payload: make([]byte, fsm.MaxQueuePayloadBytes+1), MaxPayloadBytes: 1 << 30}}}, "above the limit"},
		{"malformed queue name", &statev1.Command{Op: &statev1.Command_QueuePush{QueuePush: &statev1.QueuePush{Queue: "bad\x00name"}}}, "name"},
		{"empty queue name", &statev1.Command{Op: &statev1.Command_QueueClaim{QueueClaim: &statev1.QueueClaim{Session: a, Seq: 2, VisibilityMs: 1000}}}, "name"},
		{"no room for .dead", &statev1.Command{Op: &statev1.Command_QueuePush{QueuePush: &statev1.QueuePush{Queue: long}}}, "dead-letter"},
		{"delay too long", &statev1.Command{Op: &statev1.Command_QueuePush{QueuePush: &statev1.QueuePush{Queue: "q", DelayMs: fsm.MaxQueueDelay.Milliseconds() + 1}}}, "delay"},
		{"negative delay", &statev1.Command{Op: &statev1.Command_QueuePush{QueuePush: &statev1.QueuePush{Queue: "q", DelayMs: -1}}}, "delay"},
		{"dedupe key too long", &statev1.Command{Op: &statev1.Command_QueuePush{QueuePush: &statev1.QueuePush{Queue: "q", DedupeKey: strings.Repeat("k", 129)}}}, "dedupe key"},
		{"visibility 0", &statev1.Command{Op: &statev1.Command_QueueClaim{QueueClaim: &statev1.QueueClaim{Session: a, Seq: 2, Queue: "q", VisibilityMs: 0}}}, "visibility timeout"},
		{"visibility 99ms", &statev1.Command{Op: &statev1.Command_QueueClaim{QueueClaim: &statev1.QueueClaim{Session: a, Seq: 2, Queue: "q", VisibilityMs: 99}}}, "visibility timeout"},
		{"visibility huge", &statev1.Command{Op: &statev1.Command_QueueClaim{QueueClaim: &statev1.QueueClaim{Session: a, Seq: 2, Queue: "q", VisibilityMs: 12*3600*1000 + 1}}}, "visibility timeout"},
		{"claim without a session", &statev1.Command{Op: &statev1.Command_QueueClaim{QueueClaim: &statev1.QueueClaim{Queue: "q", VisibilityMs: 1000}}}, "needs a session"},
		{"claim by an unknown session", &statev1.Command{Op: &statev1.Command_QueueClaim{QueueClaim: &statev1.QueueClaim{Session: 99, Seq: 1, Queue: "q", VisibilityMs: 1000}}}, "session"},
		{"extend to visibility 0", &statev1.Command{Op: &statev1.Command_QueueExtend{QueueExtend: &statev1.QueueExtend{Queue: "q", Item: 1, Token: uint64(c.Grant.Token)}}}, "visibility timeout"},
		{"unknown item", &statev1.Command{Op: &statev1.Command_QueueAck{QueueAck: &statev1.QueueAck{Queue: "q", Item: 7, Token: uint64(c.Grant.Token)}}}, "never pushed"},
		{"unknown queue", &statev1.Command{Op: &statev1.Command_QueueAck{QueueAck: &statev1.QueueAck{Queue: "nope", Item: 1, Token: uint64(c.Grant.Token)}}}, "never pushed"},
		{"item 0", &statev1.Command{Op: &statev1.Command_QueueNack{QueueNack: &statev1.QueueNack{Queue: "q", Token: uint64(c.Grant.Token)}}}, "item is 0"},
		{"token 0", &statev1.Command{Op: &statev1.Command_QueueAck{QueueAck: &statev1.QueueAck{Queue: "q", Item: 1}}}, "token"},
		{"wrong token", &statev1.Command{Op: &statev1.Command_QueueAck{QueueAck: &statev1.QueueAck{Queue: "q", Item: 1, Token: uint64(c.Grant.Token) + 1}}}, "stale"},
		{"queues at their item limit", &statev1.Command{Op: &statev1.Command_QueuePush{QueuePush: &statev1.QueuePush{Queue: "q", MaxItems: 1}}}, "at their limit of 1"},
		{"queues at their byte limit", &statev1.Command{Op: &statev1.Command_QueuePush{QueuePush: &statev1.QueuePush{Queue: "other", Payload: []byte("ab"), MaxBytes: 2}}}, "bytes, at their limit of 2"},
		{"nack delay too long", &statev1.Command{Op: &statev1.Command_QueueNack{QueueNack: &statev1.QueueNack{Queue: "q", Item: 1, Token: uint64(c.Grant.Token), DelayMs: fsm.MaxQueueDelay.Milliseconds() + 1}}}, "delay"},
		{"empty push batch", &statev1.Command{Op: &statev1.Command_QueuePushBatch{QueuePushBatch: &statev1.QueuePushBatch{}}}, "1 to 32"},
		{"push batch above the limit", &statev1.Command{Op: &statev1.Command_QueuePushBatch{QueuePushBatch: &statev1.QueuePushBatch{Pushes: pushes(33, "q")}}}, "1 to 32"},
		{"push batch of two queues", &statev1.Command{Op: &statev1.Command_QueuePushBatch{QueuePushBatch: &statev1.QueuePushBatch{Pushes: append(pushes(1, "q"), pushes(1, "r")...)}}}, "a batch is of one queue"},
		{"push batch with one bad push", &statev1.Command{Op: &statev1.Command_QueuePushBatch{QueuePushBatch: &statev1.QueuePushBatch{Pushes: append(pushes(2, "q"), &statev1.QueuePush{Queue: "q", DelayMs: -1})}}}, "push 2"},
		{"push batch past the item limit", &statev1.Command{Op: &statev1.Command_QueuePushBatch{QueuePushBatch: &statev1.QueuePushBatch{Pushes: []*statev1.QueuePush{{Queue: "q", MaxItems: 2}, {Queue: "q", MaxItems: 2}}}}}, "at their limit of 2"},
		{"push batch payloads above one item's limit", &statev1.Command{Op: &statev1.Command_QueuePushBatch{QueuePushBatch: &statev1.QueuePushBatch{Pushes: []*statev1.QueuePush{{Queue: "q", Payload: make([]byte, 6), MaxPayloadBytes: 10}, {Queue: "q", Payload: make([]byte, 6), MaxPayloadBytes: 10}}}}}, "together"},
		{"claim of 33 items", &statev1.Command{Op: &statev1.Command_QueueClaim{QueueClaim: &statev1.QueueClaim{Session: a, Seq: 2, Queue: "q", VisibilityMs: 1000, MaxItems: 33}}}, "batch limit of 32"},
		{"claim with 33 acks", &statev1.Command{Op: &statev1.Command_QueueClaim{QueueClaim: &statev1.QueueClaim{Session: a, Seq: 2, Queue: "q", VisibilityMs: 1000, Acks: acks(33, uint64(c.Grant.Token))}}}, "batch limit of 32"},
		{"claim with ack_item and acks", &statev1.Command{Op: &statev1.Command_QueueClaim{QueueClaim: &statev1.QueueClaim{Session: a, Seq: 2, Queue: "q", VisibilityMs: 1000, AckItem: 1, AckToken: uint64(c.Grant.Token), Acks: acks(1, uint64(c.Grant.Token))}}}, "not both"},
		{"claim with an ack of item 0", &statev1.Command{Op: &statev1.Command_QueueClaim{QueueClaim: &statev1.QueueClaim{Session: a, Seq: 2, Queue: "q", VisibilityMs: 1000, Acks: append(acks(1, uint64(c.Grant.Token)), &statev1.QueueItemToken{Token: 1})}}}, "ack 1: item is 0"},
		{"empty ack batch", &statev1.Command{Op: &statev1.Command_QueueAckBatch{QueueAckBatch: &statev1.QueueAckBatch{Queue: "q"}}}, "at least one"},
		{"ack batch with token 0", &statev1.Command{Op: &statev1.Command_QueueAckBatch{QueueAckBatch: &statev1.QueueAckBatch{Queue: "q", Acks: []*statev1.QueueItemToken{{Item: 1, Token: uint64(c.Grant.Token)}, {Item: 1}}}}}, "ack 1"},
		{"ack batch of a bad queue name", &statev1.Command{Op: &statev1.Command_QueueAckBatch{QueueAckBatch: &statev1.QueueAckBatch{Queue: "bad\x00", Acks: acks(1, uint64(c.Grant.Token))}}}, "name"},
	}
	for _, tc := range cases {
		before := mustSnapshot(t, m)
		tc.cmd.NowUnixMs = 5000
		res := m.Apply(tc.cmd)
		if res.Err == nil || !strings.Contains(res.Err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one containing %q", tc.name, res.Err, tc.want)
		}
		if !bytes.Equal(before, mustSnapshot(t, m)) {
			t.Errorf("%s: the refused command changed the state", tc.name)
		}
	}
}

// queueGolden is a snapshot with every part of the queues' state: items
// available, delayed, claimed (by a session), retried and dead-lettered,
// a dedupe table, a waiting claim and the queues' time.
var queueGolden = filepath.Join("testdata", "snapshot-queue-v1.bin")

func queueGoldenState(t *testing.T) *fsm.Machine {
	t.Helper()
	m := fsm.New(nil)
	m.Apply(&statev1.Command{Op: &statev1.Command_Init{Init: &statev1.Init{Issuer: "golden", TokenFloor: 40}}})
	a, b := createSession(t, m), createSession(t, m)
	push(m, 1000, &statev1.QueuePush{Queue: "orders", Payload: []byte("o1"), DedupeKey: "o1", MaxDeliveries: 1})
	push(m, 1001, &statev1.QueuePush{Queue: "orders", Payload: []byte("o2"), DedupeKey: "o2", MaxDeliveries: 3})
	push(m, 1002, &statev1.QueuePush{Queue: "orders", Payload: []byte("later"), DelayMs: 60000})
	c := claimQ(m, 1003, a, 1, "orders", 5000, false)
	expireClaim(m, 7000, c.Grant.Token, 0) // o1 dead-lettered
	claimQ(m, 7001, a, 2, "orders", 5000, false)
	claimQ(m, 7002, b, 1, "jobs", 1000, true) // waits
	return m
}

// The queues' snapshot format is stable: the same commands snapshot to
// the bytes in testdata, which restore and snapshot again unchanged.
func TestQueue_GoldenSnapshot(t *testing.T) {
	data := mustSnapshot(t, queueGoldenState(t))
	if *update {
		if err := os.WriteFile(queueGolden, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden, err := os.ReadFile(queueGolden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, versioned(golden)) {
		t.Errorf("the same commands now snapshot to other bytes than %s", queueGolden)
	}
	m := fsm.New(nil)
	if err := m.Restore(golden); err != nil {
		t.Fatalf("Restore(%s): %v", queueGolden, err)
	}
	if again := mustSnapshot(t, m); !bytes.Equal(again, versioned(golden)) {
		t.Fatal("a restored snapshot does not snapshot to the same bytes")
	}
	if st := m.Queue("orders"); st.Claimed != 1 || st.Delayed != 1 || st.LastItem != 3 || st.Clock != 7001 {
		t.Fatalf("orders after restore: %+v", st)
	}
	if st := m.Queue("jobs"); st.Waiters != 1 {
		t.Fatalf("jobs after restore: %+v", st)
	}
	if dead := m.QueueItems("orders.dead", 0, 10); len(dead) != 1 || dead[0].OriginItem != 1 {
		t.Fatalf("orders.dead after restore: %+v", dead)
	}
	if res := push(m, 8000, &statev1.QueuePush{Queue: "orders", Payload: []byte("o2 again"), DedupeKey: "o2"}); !res.Queue.Duplicate || res.Queue.Item != 2 {
		t.Fatalf("the restored dedupe table: %+v", res.Queue)
	}
}

// pushes returns n pushes of one byte to queue.
func pushes(n int, queue string) []*statev1.QueuePush {
	out := make([]*statev1.QueuePush, n)
	for i := range out {
		out[i] = &statev1.QueuePush{Queue: queue, Payload: []byte("p")}
	}
	return out
}

// acks returns n acks of item 1 with token.
func acks(n int, token uint64) []*statev1.QueueItemToken {
	out := make([]*statev1.QueueItemToken, n)
	for i := range out {
		out[i] = &statev1.QueueItemToken{Item: 1, Token: token}
	}
	return out
}

// TestQueue_PushBatchDuplicatesInTheBatch: a push whose dedupe key an
// earlier push of its batch has is a duplicate of that push's item, the
// first with the key, whichever push it is.
func TestQueue_PushBatchDuplicatesInTheBatch(t *testing.T) {
	m := newMachine(t)
	keys := []string{"a", "b", "b", "c", "a", "c"}
	var ps []*statev1.QueuePush
	for _, k := range keys {
		ps = append(ps, &statev1.QueuePush{Queue: "q", Payload: []byte(k), DedupeKey: k, DedupeWindow: 100})
	}
	res := m.Apply(&statev1.Command{NowUnixMs: 1000, Op: &statev1.Command_QueuePushBatch{QueuePushBatch: &statev1.QueuePushBatch{Pushes: ps}}})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	want := []fsm.PushOutcome{{Item: 1}, {Item: 2}, {Item: 2, Duplicate: true}, {Item: 3}, {Item: 1, Duplicate: true}, {Item: 3, Duplicate: true}}
	for i, o := range res.Queue.Pushed {
		if o != want[i] {
			t.Fatalf("push %d (%q): %+v, want %+v; all %+v", i, keys[i], o, want[i], res.Queue.Pushed)
		}
	}
	if st := m.Queue("q"); st.Available != 3 {
		t.Fatalf("queue has %d available items, want 3", st.Available)
	}
}
