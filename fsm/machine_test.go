package fsm_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

func newMachine(t *testing.T) *fsm.Machine {
	t.Helper()
	m := fsm.New(nil)
	if res := m.Apply(initCommand(0)); res.Err != nil {
		t.Fatalf("init: %v", res.Err)
	}
	return m
}

func createSession(t *testing.T, m *fsm.Machine) uint64 {
	t.Helper()
	res := m.Apply(&statev1.Command{Op: &statev1.Command_CreateSession{CreateSession: &statev1.CreateSession{TtlMs: 1000}}})
	if res.Err != nil {
		t.Fatalf("create session: %v", res.Err)
	}
	return res.Session
}

func acquire(m *fsm.Machine, session, seq uint64, name string, wait bool) fsm.Result {
	return m.Apply(&statev1.Command{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Session: session, Seq: seq, Name: name, Wait: wait}}})
}

func release(m *fsm.Machine, session, seq uint64, name string) fsm.Result {
	return m.Apply(&statev1.Command{Op: &statev1.Command_Release{Release: &statev1.Release{Session: session, Seq: seq, Name: name}}})
}

func expire(m *fsm.Machine, session, term uint64) fsm.Result {
	return m.Apply(&statev1.Command{Op: &statev1.Command_ExpireSession{ExpireSession: &statev1.ExpireSession{Session: session, Term: term}}})
}

func TestMachine_TokensIncreaseAcrossForcedExpiries(t *testing.T) {
	m := newMachine(t)
	var last fence.Token
	for i := 0; i < 20; i++ {
		s := createSession(t, m)
		res := acquire(m, s, 1, "job", false)
		if !res.Granted {
			t.Fatalf("grant %d: %+v", i, res)
		}
		if res.Grant.Token <= last {
			t.Fatalf("grant %d: Token()=%d, want above %d", i, res.Grant.Token, last)
		}
		last = res.Grant.Token
		if res := expire(m, s, 0); !res.Ended {
			t.Fatalf("expire %d: %+v", i, res)
		}
	}
}

func TestMachine_NoSecondGrantWhileHolderAlive(t *testing.T) {
	m := newMachine(t)
	a, b := createSession(t, m), createSession(t, m)
	if res := acquire(m, a, 1, "x", false); !res.Granted {
		t.Fatalf("first acquire: %+v", res)
	}
	res := acquire(m, b, 1, "x", false)
	if res.Granted || res.Queued || res.Holder != a {
		t.Fatalf("second acquire=%+v, want not granted, holder %d", res, a)
	}
}

// A waiter whose session expires while it waits is never granted, even when
// the holder releases afterwards (etcd#11456 was this bug).
func TestMachine_ExpiredWaiterNeverGranted(t *testing.T) {
	m := newMachine(t)
	holder, w1, w2 := createSession(t, m), createSession(t, m), createSession(t, m)
	acquire(m, holder, 1, "x", false)
	if res := acquire(m, w1, 1, "x", true); !res.Queued {
		t.Fatalf("w1 acquire=%+v, want queued", res)
	}
	if res := acquire(m, w2, 1, "x", true); !res.Queued {
		t.Fatalf("w2 acquire=%+v, want queued", res)
	}
	expire(m, w1, 0)
	release(m, holder, 2, "x")
	if got := m.Lock("x").Holder.Session; got != w2 {
		t.Fatalf("holder after release=%d, want %d (w1 expired while waiting)", got, w2)
	}
}

func TestMachine_ExpiryFromOlderTermIgnored(t *testing.T) {
	m := newMachine(t)
	s := createSession(t, m)
	m.Apply(&statev1.Command{Op: &statev1.Command_NewLeader{NewLeader: &statev1.NewLeader{Term: 5}}})
	if res := expire(m, s, 4); !res.Ignored {
		t.Fatalf("expire in term 4 after leader of term 5=%+v, want ignored", res)
	}
	if _, ok := m.Session(s); !ok {
		t.Fatal("session expired by a deposed leader's command")
	}
	if res := expire(m, s, 5); !res.Ended {
		t.Fatalf("expire in current term=%+v, want ended", res)
	}
}

func TestMachine_ReleaseResults(t *testing.T) {
	m := newMachine(t)
	a, b := createSession(t, m), createSession(t, m)
	acquire(m, a, 1, "x", false)
	for _, tt := range []struct {
		name    string
		session uint64
		seq     uint64
		want    fsm.ReleaseResult
	}{
		{"other session", b, 1, fsm.NotOwned},
		{"holder", a, 2, fsm.Released},
		{"retry of the release", a, 2, fsm.Released},
		{"again", a, 3, fsm.AlreadyReleased},
		{"unknown session", 999, 1, fsm.AlreadyReleased},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := release(m, tt.session, tt.seq, "x").Release; got != tt.want {
				t.Fatalf("Release=%v, want %v", got, tt.want)
			}
		})
	}
}

func TestMachine_RetriedAcquireAppliedOnce(t *testing.T) {
	m := newMachine(t)
	s := createSession(t, m)
	first := acquire(m, s, 1, "x", false)
	release(m, s, 2, "x")
	retry := acquire(m, s, 1, "x", false)
	if !retry.Granted || retry.Grant.Token != first.Grant.Token {
		t.Fatalf("retry=%+v, want the original grant with token %d", retry, first.Grant.Token)
	}
	if m.Lock("x").Held() {
		t.Fatal("the retry of an acquire that was already applied and released acquired the lock again")
	}
}

func TestMachine_PromotedWaiterRetryReturnsGrant(t *testing.T) {
	m := newMachine(t)
	a, b := createSession(t, m), createSession(t, m)
	acquire(m, a, 1, "x", false)
	acquire(m, b, 7, "x", true)
	release(m, a, 2, "x")
	granted := m.Lock("x").Holder
	release(m, b, 8, "x")
	retry := acquire(m, b, 7, "x", true)
	if !retry.Granted || retry.Grant.Token != granted.Token {
		t.Fatalf("retry of promoted acquire=%+v, want grant with token %d", retry, granted.Token)
	}
	if m.Lock("x").Held() {
		t.Fatal("retry re-acquired a lock the session had released")
	}
}

func TestMachine_BadInputChangesNothing(t *testing.T) {
	m := newMachine(t)
	s := createSession(t, m)
	acquire(m, s, 1, "x", false)
	before := mustSnapshot(t, m)
	for _, tt := range []struct {
		name string
		cmd  *statev1.Command
		want error
		msg  string
	}{
		{"empty name", &statev1.Command{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Session: s, Seq: 2}}}, fence.ErrInvalidArgument, "empty"},
		{"long name", &statev1.Command{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Session: s, Seq: 2, Name: strings.Repeat("n", 513)}}}, fence.ErrInvalidArgument, "longer than 512"},
		{"control char", &statev1.Command{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Session: s, Seq: 2, Name: "a\x00b"}}}, fence.ErrInvalidArgument, "control"},
		{"invalid utf8", &statev1.Command{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Session: s, Seq: 2, Name: "\xff"}}}, fence.ErrInvalidArgument, "UTF-8"},
		{"unknown session", &statev1.Command{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Session: 99, Seq: 1, Name: "y"}}}, fence.ErrSessionNotFound, "does not exist"},
		{"ttl too short", &statev1.Command{Op: &statev1.Command_CreateSession{CreateSession: &statev1.CreateSession{TtlMs: 99}}}, fence.ErrInvalidArgument, "between 100ms and 24h"},
		{"ttl too long", &statev1.Command{Op: &statev1.Command_CreateSession{CreateSession: &statev1.CreateSession{TtlMs: 86400001}}}, fence.ErrInvalidArgument, "between"},
		{"one-shot ttl", &statev1.Command{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Name: "z", TtlMs: 5}}}, fence.ErrInvalidArgument, "ttl"},
		{"seq reused for another name", &statev1.Command{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Session: s, Seq: 1, Name: "y"}}}, fence.ErrInvalidArgument, "already used"},
		{"floor above max", &statev1.Command{Op: &statev1.Command_Init{Init: &statev1.Init{Issuer: "x", TokenFloor: 1 << 63}}}, fence.ErrInvalidArgument, "above the maximum"},
		{"unknown command", &statev1.Command{}, fence.ErrInvalidArgument, "unknown command"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := m.Apply(tt.cmd)
			if !errors.Is(res.Err, tt.want) || !strings.Contains(res.Err.Error(), tt.msg) {
				t.Fatalf("Err=%v, want %v mentioning %q", res.Err, tt.want, tt.msg)
			}
			if !bytes.Equal(mustSnapshot(t, m), before) {
				t.Fatal("a refused command changed the state")
			}
		})
	}
}

func TestMachine_TokenFloorAndOverflow(t *testing.T) {
	m := fsm.New(nil)
	m.Apply(initCommand(uint64(fence.MaxToken) - 1))
	s := createSession(t, m)
	res := acquire(m, s, 1, "x", false)
	if !res.Granted || res.Grant.Token != fence.MaxToken {
		t.Fatalf("acquire above floor=%+v, want token %d", res, fence.MaxToken)
	}
	res = acquire(m, s, 2, "y", false)
	if !errors.Is(res.Err, fence.ErrTokenOverflow) {
		t.Fatalf("acquire past the maximum: Err=%v, want ErrTokenOverflow", res.Err)
	}
	// A lower floor never lowers the counter.
	m.Apply(initCommand(5))
	if m.LastToken() != fence.MaxToken {
		t.Fatalf("LastToken()=%d after a lower floor, want %d", m.LastToken(), fence.MaxToken)
	}
}

func TestMachine_OneShotTryFailureLeavesNoSession(t *testing.T) {
	m := newMachine(t)
	holder := createSession(t, m)
	acquire(m, holder, 1, "x", false)
	res := m.Apply(&statev1.Command{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Name: "x", TtlMs: 1000, RequestId: "r1"}}})
	if res.Granted || res.Err != nil {
		t.Fatalf("one-shot acquire of a held lock=%+v, want not granted", res)
	}
	if got := m.SessionCount(); got != 1 {
		t.Fatalf("SessionCount()=%d after a failed one-shot try, want 1", got)
	}
	res = m.Apply(&statev1.Command{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Name: "y", TtlMs: 1000, RequestId: "r2"}}})
	retry := m.Apply(&statev1.Command{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Name: "y", TtlMs: 1000, RequestId: "r2"}}})
	if !res.Granted || retry.Grant != res.Grant {
		t.Fatalf("retried one-shot=%+v, want the original %+v", retry, res)
	}
}

func TestMachine_CancelWait(t *testing.T) {
	m := newMachine(t)
	a, b := createSession(t, m), createSession(t, m)
	acquire(m, a, 1, "x", false)
	acquire(m, b, 1, "x", true)
	cancel := &statev1.Command{Op: &statev1.Command_CancelWait{CancelWait: &statev1.CancelWait{Session: b, Name: "x"}}}
	if res := m.Apply(cancel); res.Granted {
		t.Fatalf("cancel=%+v, want not granted", res)
	}
	release(m, a, 2, "x")
	if m.Lock("x").Held() {
		t.Fatal("a cancelled waiter was granted")
	}
	acquire(m, a, 3, "x", false)
	acquire(m, b, 2, "x", true)
	release(m, a, 4, "x")
	if res := m.Apply(cancel); !res.Granted || res.Grant.Session != b {
		t.Fatalf("cancel after the grant=%+v, want the grant to %d", res, b)
	}
}
