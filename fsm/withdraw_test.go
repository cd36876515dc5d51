package fsm_test

import (
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
