package fsm_test

import (
	"bytes"
	"errors"
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

func withdraw(m *fsm.Machine, session, seq, acquireSeq uint64, name string) fsm.Result {
	return m.Apply(&statev1.Command{Op: &statev1.Command_Release{Release: &statev1.Release{Session: session, Seq: seq, Name: name, WithdrawSeq: acquireSeq}}})
}

// A withdrawal applied before its acquire makes the acquire, when it
// arrives, change nothing: the order in which two calls of one session
// reach the log cannot leave the lock held.
func TestMachine_WithdrawBeforeAcquire(t *testing.T) {
	for _, wait := range []bool{false, true} {
		m := newMachine(t)
		a, b := createSession(t, m), createSession(t, m)
		if res := withdraw(m, a, 0, 5, "x"); res.Err != nil || res.Release != fsm.AlreadyReleased {
			t.Fatalf("wait=%v: withdraw of an acquire not yet applied = %+v, want AlreadyReleased", wait, res)
		}
		if res := acquire(m, a, 5, "x", wait); !errors.Is(res.Err, fence.ErrInvalidArgument) || res.Granted || res.Queued {
			t.Fatalf("wait=%v: withdrawn acquire arriving late = %+v, want refused with fence.ErrInvalidArgument", wait, res)
		}
		if res := acquire(m, b, 1, "x", false); !res.Granted {
			t.Fatalf("wait=%v: another session's acquire after the withdrawn one = %+v, want granted", wait, res)
		}
	}
}

// A withdrawal applied after its acquire releases the grant it made, or
// takes its waiter out of the queue, and a copy of the acquire arriving
// later is refused.
func TestMachine_WithdrawAfterAcquire(t *testing.T) {
	m := newMachine(t)
	a, b := createSession(t, m), createSession(t, m)
	if res := acquire(m, a, 1, "x", false); !res.Granted {
		t.Fatalf("acquire: %+v", res)
	}
	if res := withdraw(m, a, 2, 1, "x"); res.Err != nil || res.Release != fsm.Released {
		t.Fatalf("withdraw of a granted acquire = %+v, want Released", res)
	}
	if res := acquire(m, a, 1, "x", false); !errors.Is(res.Err, fence.ErrInvalidArgument) {
		t.Fatalf("copy of the withdrawn acquire = %+v, want refused with fence.ErrInvalidArgument", res)
	}
	if info := m.Lock("x"); info.Held() {
		t.Fatalf("lock after the withdrawal = %+v, want free", info)
	}

	// Queued behind b: the withdrawal ends the wait, and b's release
	// grants no one.
	if res := acquire(m, b, 1, "x", false); !res.Granted {
		t.Fatalf("b's acquire: %+v", res)
	}
	if res := acquire(m, a, 3, "x", true); !res.Queued {
		t.Fatalf("a's waiting acquire = %+v, want queued", res)
	}
	if res := withdraw(m, a, 4, 3, "x"); res.Err != nil || res.Release != fsm.NotOwned {
		t.Fatalf("withdraw of a queued acquire = %+v, want NotOwned", res)
	}
	if info := m.Lock("x"); len(info.Waiters) != 0 {
		t.Fatalf("waiters after the withdrawal = %v, want none", info.Waiters)
	}
	if res := release(m, b, 2, "x"); res.Release != fsm.Released {
		t.Fatalf("b's release = %+v", res)
	}
	if info := m.Lock("x"); info.Held() {
		t.Fatalf("lock after b's release = %+v, want free", info)
	}

	// Queued, then granted before the withdrawal: the grant is released.
	acquire(m, b, 3, "x", false)
	acquire(m, a, 5, "x", true)
	release(m, b, 4, "x")
	if info := m.Lock("x"); info.Holder.Session != a {
		t.Fatalf("lock after b's release = %+v, want held by a", info)
	}
	if res := withdraw(m, a, 6, 5, "x"); res.Release != fsm.Released {
		t.Fatalf("withdraw of a promoted acquire = %+v, want Released", res)
	}
	if info := m.Lock("x"); info.Held() {
		t.Fatalf("lock after the withdrawal = %+v, want free", info)
	}
}

// A withdrawal undoes its own acquire only: applied again, or after the
// session acquired the lock anew, it leaves the later grant alone.
func TestMachine_WithdrawLeavesLaterGrants(t *testing.T) {
	m := newMachine(t)
	a := createSession(t, m)
	acquire(m, a, 1, "x", false)
	withdraw(m, a, 0, 1, "x")
	res := acquire(m, a, 2, "x", false)
	if !res.Granted {
		t.Fatalf("new acquire: %+v", res)
	}
	for i := 0; i < 2; i++ {
		if res := withdraw(m, a, 0, 1, "x"); res.Err != nil || res.Release != fsm.AlreadyReleased {
			t.Fatalf("withdrawal applied again = %+v, want AlreadyReleased", res)
		}
	}
	if info := m.Lock("x"); info.Holder.Token != res.Grant.Token {
		t.Fatalf("lock after a repeated withdrawal = %+v, want still held with token %d", info, res.Grant.Token)
	}
	// The same for a waiter of a later acquire.
	b := createSession(t, m)
	acquire(m, b, 1, "y", false)
	acquire(m, a, 3, "y", true)
	withdraw(m, a, 0, 3, "y")
	acquire(m, a, 4, "y", true)
	withdraw(m, a, 0, 3, "y")
	if info := m.Lock("y"); len(info.Waiters) != 1 || info.Waiters[0] != a {
		t.Fatalf("waiters after a repeated withdrawal = %v, want [%d]", info.Waiters, a)
	}
}

// Withdrawals that cannot name an acquire are refused and change nothing.
func TestMachine_WithdrawInvalid(t *testing.T) {
	m := newMachine(t)
	a := createSession(t, m)
	acquire(m, a, 1, "x", false)
	release(m, a, 2, "y")
	for _, tc := range []struct {
		what          string
		seq, withdraw uint64
		name          string
	}{
		{"its own seq", 3, 3, "x"},
		{"a release's seq", 3, 2, "y"},
		{"an acquire of another name", 3, 1, "y"},
	} {
		if res := withdraw(m, a, tc.seq, tc.withdraw, tc.name); !errors.Is(res.Err, fence.ErrInvalidArgument) {
			t.Errorf("withdraw naming %s = %+v, want fence.ErrInvalidArgument", tc.what, res)
		}
	}
	if info := m.Lock("x"); info.Holder.Session != a {
		t.Fatalf("lock after refused withdrawals = %+v, want still held by %d", info, a)
	}
	// Beyond the de-duplication window.
	for seq := uint64(10); seq < 200; seq++ {
		release(m, a, seq, "z")
	}
	if res := withdraw(m, a, 0, 1, "x"); !errors.Is(res.Err, fence.ErrInvalidArgument) {
		t.Errorf("withdraw of a forgotten acquire = %+v, want fence.ErrInvalidArgument", res)
	}
}

// A release whose seq repeats an earlier release of the session is a
// retry of it: it is answered with the first outcome and does nothing,
// even if it now carries a withdraw_seq, so the acquire it names is
// applied as any other when it arrives. The SDK's withdrawals carry seq 0
// and are never answered from a remembered reply: the same withdrawal
// sent after that plain release withdraws the acquire. The same for the
// lock, the read/write lock and the semaphore, which all de-duplicate by
// (session, seq). (The semaphore property test once recorded such a
// retried release as a withdrawal: rapid seed 17853568048862501723.)
func TestWithdraw_ReusedReleaseSeqIsARetry(t *testing.T) {
	type prim struct {
		name    string
		acquire func(session, seq uint64) *statev1.Command
		release func(session, seq, withdrawSeq uint64) *statev1.Command
	}
	prims := []prim{
		{"lock",
			func(s, seq uint64) *statev1.Command {
				return &statev1.Command{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Session: s, Seq: seq, Name: "x", Wait: true}}}
			},
			func(s, seq, w uint64) *statev1.Command {
				return &statev1.Command{Op: &statev1.Command_Release{Release: &statev1.Release{Session: s, Seq: seq, Name: "x", WithdrawSeq: w}}}
			}},
		{"rwlock",
			func(s, seq uint64) *statev1.Command {
				return &statev1.Command{Op: &statev1.Command_RwAcquire{RwAcquire: &statev1.RWAcquire{Session: s, Seq: seq, Name: "x", Mode: statev1.RWMode_RW_MODE_WRITE, Wait: true}}}
			},
			func(s, seq, w uint64) *statev1.Command {
				return &statev1.Command{Op: &statev1.Command_RwRelease{RwRelease: &statev1.RWRelease{Session: s, Seq: seq, Name: "x", WithdrawSeq: w}}}
			}},
		{"semaphore",
			func(s, seq uint64) *statev1.Command {
				return &statev1.Command{Op: &statev1.Command_SemAcquire{SemAcquire: &statev1.SemAcquire{Session: s, Seq: seq, Name: "x", Capacity: 3, Permits: 2, Wait: true}}}
			},
			func(s, seq, w uint64) *statev1.Command {
				return &statev1.Command{Op: &statev1.Command_SemRelease{SemRelease: &statev1.SemRelease{Session: s, Seq: seq, Name: "x", WithdrawSeq: w}}}
			}},
	}
	for _, p := range prims {
		t.Run(p.name, func(t *testing.T) {
			m := newMachine(t)
			a := createSession(t, m)
			if res := m.Apply(p.release(a, 2, 0)); res.Err != nil || res.Release != fsm.AlreadyReleased {
				t.Fatalf("plain release seq 2 = %+v, want AlreadyReleased", res)
			}
			// Seq 2 again, now naming acquire seq 3: the retry's answer.
			before := mustSnapshot(t, m)
			if res := m.Apply(p.release(a, 2, 3)); res.Err != nil || res.Release != fsm.AlreadyReleased {
				t.Fatalf("release seq 2 again with withdraw_seq 3 = %+v, want the first answer AlreadyReleased", res)
			}
			if !bytes.Equal(before, mustSnapshot(t, m)) {
				t.Fatal("a retried release seq changed the state")
			}
			if res := m.Apply(p.acquire(a, 3)); res.Err != nil || !res.Granted {
				t.Fatalf("acquire seq 3 after a retried release = %+v, want granted (nothing withdrew it)", res)
			}

			// The SDK's form, seq 0, is applied every time it arrives.
			b := createSession(t, m)
			if res := m.Apply(p.release(b, 2, 0)); res.Err != nil {
				t.Fatalf("b's plain release seq 2: %+v", res)
			}
			for i := 0; i < 2; i++ {
				if res := m.Apply(p.release(b, 0, 3)); res.Err != nil || res.Release != fsm.NotOwned {
					t.Fatalf("b's withdrawal of seq 3 (copy %d) = %+v, want NotOwned (a holds it)", i, res)
				}
			}
			before = mustSnapshot(t, m)
			if res := m.Apply(p.acquire(b, 3)); !errors.Is(res.Err, fence.ErrInvalidArgument) || res.Granted || res.Queued {
				t.Fatalf("b's withdrawn acquire seq 3 = %+v, want refused with fence.ErrInvalidArgument", res)
			}
			if !bytes.Equal(before, mustSnapshot(t, m)) {
				t.Fatal("the refused withdrawn acquire changed the state")
			}
		})
	}
}
