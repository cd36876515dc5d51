//go:build fencedfaults

package fsm_test

import (
	"errors"
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// The unfenced-kv fault of a test build accepts a stale write on the
// machine it is set on, and only there; the command is the same.
func TestMachine_UnfencedKVFault(t *testing.T) {
	fenced, unfenced := newMachine(t), newMachine(t)
	unfenced.SetUnfencedKV(true)
	for _, m := range []*fsm.Machine{fenced, unfenced} {
		m.Apply(initCommand(10))
		kvWrite(m, &statev1.KVWrite{Key: "k", Token: 5, Value: []byte("new")})
	}
	stale := &statev1.KVWrite{Key: "k", Token: 3, Value: []byte("old")}
	var se *fence.StaleTokenError
	if res := kvWrite(fenced, stale); !errors.As(res.Err, &se) {
		t.Fatalf("stale write without the fault: %v, want a stale token error", res.Err)
	}
	if res := kvWrite(unfenced, stale); res.Err != nil {
		t.Fatalf("stale write with the unfenced-kv fault: %v, want it accepted", res.Err)
	}
	if got := string(unfenced.KV("k").Value); got != "old" {
		t.Fatalf("value=%q after the accepted stale write, want old", got)
	}
}

// Each primitive fault of a test build breaks its rule on the machine it
// is set on, and only there: the over-capacity fault grants a permit
// beyond the capacity (slot 2 of 2), the reader-with-writer fault admits a
// reader beside a writer, the second-leader fault makes a candidate lead
// beside the leader. The same commands on a machine without the fault
// queue the request.
func TestMachine_PrimitiveFaults(t *testing.T) {
	for _, tt := range []struct {
		name  string
		set   func(*fsm.Machine)
		apply func(m *fsm.Machine, first, second uint64) fsm.Result
	}{
		{"over-capacity", func(m *fsm.Machine) { m.SetOverCapacity(true) }, func(m *fsm.Machine, a, b uint64) fsm.Result {
			semAcquire(m, a, 1, "pool", 2, 2, false)
			return semAcquire(m, b, 1, "pool", 2, 1, true)
		}},
		{"reader-with-writer", func(m *fsm.Machine) { m.SetReaderWithWriter(true) }, func(m *fsm.Machine, a, b uint64) fsm.Result {
			rwAcquire(m, a, 1, "db", true, false)
			return rwAcquire(m, b, 1, "db", false, true)
		}},
		{"second-leader", func(m *fsm.Machine) { m.SetSecondLeader(true) }, func(m *fsm.Machine, a, b uint64) fsm.Result {
			campaign(m, a, 1, "e", "a")
			return campaign(m, b, 1, "e", "b")
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			good, broken := newMachine(t), newMachine(t)
			tt.set(broken)
			for _, m := range []*fsm.Machine{good, broken} {
				m.Apply(initCommand(0))
			}
			if res := tt.apply(good, createSession(t, good), createSession(t, good)); res.Granted || !res.Queued {
				t.Fatalf("without the fault: %+v, want the second request queued", res)
			}
			res := tt.apply(broken, createSession(t, broken), createSession(t, broken))
			if !res.Granted {
				t.Fatalf("with the fault: %+v, want the second request granted", res)
			}
			if tt.name == "over-capacity" && (len(res.Permits) != 1 || res.Permits[0].Slot != 2) {
				t.Fatalf("with the fault: permits %+v, want slot 2 of a semaphore of 2", res.Permits)
			}
		})
	}
}

// The unscoped-kv fault of a test build lets a live token write a key
// outside its grant's scope (the lock "lock-1" writes its prefix
// neighbour "lock-10" and another lock's key "lock-3") on the machine it is set on, and only there; it keeps the
// stale-token check.
func TestMachine_UnscopedKVFault(t *testing.T) {
	scoped, unscoped := newMachine(t), newMachine(t)
	unscoped.SetUnscopedKV(true)
	for _, m := range []*fsm.Machine{scoped, unscoped} {
		low := acquire(m, createSession(t, m), 1, "lock-1", false)
		high := acquire(m, createSession(t, m), 1, "lock-2", false)
		if !low.Granted || !high.Granted {
			t.Fatalf("acquires: %+v, %+v", low, high)
		}
		if res := kvWrite(m, &statev1.KVWrite{Key: "lock-2", Token: uint64(high.Grant.Token), Value: []byte("v"), Scoped: true}); res.Err != nil {
			t.Fatalf("in-scope write: %v", res.Err)
		}
		for _, key := range []string{"lock-10", "lock-3"} {
			res := kvWrite(m, &statev1.KVWrite{Key: key, Token: uint64(low.Grant.Token), Value: []byte("x"), Scoped: true})
			if m == scoped && !errors.Is(res.Err, fence.ErrScopeMismatch) {
				t.Fatalf("cross-scope write of %q without the fault: %v, want a scope mismatch", key, res.Err)
			}
			if m == unscoped && res.Err != nil {
				t.Fatalf("cross-scope write of %q with the unscoped-kv fault: %v, want it accepted", key, res.Err)
			}
		}
		var se *fence.StaleTokenError
		if res := kvWrite(m, &statev1.KVWrite{Key: "lock-2", Token: uint64(low.Grant.Token), Value: []byte("x"), Scoped: true}); !errors.As(res.Err, &se) {
			t.Fatalf("stale cross-scope write: %v, want a stale token error (the fault keeps the stale check)", res.Err)
		}
	}
}

// The ack-any-token fault of a test build covers every ack: QueueAck, the
// acks a claim carries (ack-and-claim-next, one or several) and an ack
// batch. On a machine without it, an ack with the item's earlier claim
// token is stale and the property test's ack check (ackViolation) passes;
// with it, the ack is accepted and the check catches it: the negative
// control of the check.
func TestQueue_AckAnyTokenFaultCoversBatches(t *testing.T) {
	type step func(m *fsm.Machine, sid uint64, item uint64, stale fence.Token) (fsm.Result, []*statev1.QueueItemToken)
	for _, tt := range []struct {
		name string
		ack  step
	}{
		{"claim ack_item", func(m *fsm.Machine, sid, item uint64, stale fence.Token) (fsm.Result, []*statev1.QueueItemToken) {
			return m.Apply(&statev1.Command{Op: &statev1.Command_QueueClaim{QueueClaim: &statev1.QueueClaim{Session: sid, Seq: 3, Queue: "q", VisibilityMs: 1000, AckItem: item, AckToken: uint64(stale)}}}),
				[]*statev1.QueueItemToken{{Item: item, Token: uint64(stale)}}
		}},
		{"claim acks", func(m *fsm.Machine, sid, item uint64, stale fence.Token) (fsm.Result, []*statev1.QueueItemToken) {
			acks := []*statev1.QueueItemToken{{Item: item, Token: uint64(stale)}, {Item: item + 100, Token: 1}}
			return m.Apply(&statev1.Command{Op: &statev1.Command_QueueClaim{QueueClaim: &statev1.QueueClaim{Session: sid, Seq: 3, Queue: "q", VisibilityMs: 1000, MaxItems: 2, Acks: acks}}}), acks
		}},
		{"ack batch", func(m *fsm.Machine, sid, item uint64, stale fence.Token) (fsm.Result, []*statev1.QueueItemToken) {
			acks := []*statev1.QueueItemToken{{Item: item, Token: uint64(stale)}}
			return m.Apply(&statev1.Command{Op: &statev1.Command_QueueAckBatch{QueueAckBatch: &statev1.QueueAckBatch{Queue: "q", Acks: acks}}}), acks
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, fault := range []bool{false, true} {
				m := newMachine(t)
				m.SetAckAnyToken(fault)
				m.Apply(initCommand(0))
				sid := createSession(t, m)
				m.Apply(&statev1.Command{Op: &statev1.Command_QueuePush{QueuePush: &statev1.QueuePush{Queue: "q", Payload: []byte("x")}}})
				claim := func(seq uint64) fsm.ClaimInfo {
					res := m.Apply(&statev1.Command{Op: &statev1.Command_QueueClaim{QueueClaim: &statev1.QueueClaim{Session: sid, Seq: seq, Queue: "q", VisibilityMs: 1000}}})
					if !res.Granted {
						t.Fatalf("claim %d: %+v", seq, res)
					}
					return res.Queue.Claim
				}
				first := claim(1)
				m.Apply(&statev1.Command{Op: &statev1.Command_QueueNack{QueueNack: &statev1.QueueNack{Queue: "q", Item: first.Item, Token: uint64(first.Grant.Token)}}})
				second := claim(2) // the item again, with a higher token: first's is stale
				scope := fsm.ClaimScope("q", second.Item)
				before := map[string]fence.Token{scope: second.Grant.Token}
				res, acks := tt.ack(m, sid, first.Item, first.Grant.Token)
				if res.Err != nil {
					t.Fatalf("fault %v: %v", fault, res.Err)
				}
				after := map[string]fence.Token{}
				if ci, ok := m.Claim(second.Grant.Token); ok {
					after[fsm.ClaimScope("q", ci.Item)] = second.Grant.Token
				}
				refs := make([]ackRef, len(acks))
				for i, a := range acks {
					refs[i] = ackRef{fsm.ClaimScope("q", a.GetItem()), fence.Token(a.GetToken())}
				}
				err := ackViolation(refs, res.Queue.Acks, before, after)
				switch {
				case !fault && (res.Queue.Acks[0] != fsm.AckStale || err != nil):
					t.Fatalf("without the fault: acks %v, check %v; want stale and no violation", res.Queue.Acks, err)
				case fault && (res.Queue.Acks[0] != fsm.AckAcked || err == nil):
					t.Fatalf("with the fault: acks %v, check %v; want acked and a violation caught", res.Queue.Acks, err)
				}
			}
		})
	}
}
