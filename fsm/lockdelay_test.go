package fsm_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

func acquireDelayed(m *fsm.Machine, session, seq uint64, name string, wait bool, delayMs int64) fsm.Result {
	return m.Apply(&statev1.Command{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Session: session, Seq: seq, Name: name, Wait: wait, LockDelayMs: delayMs}}})
}

func endDelay(m *fsm.Machine, name string, after fence.Token, term uint64) fsm.Result {
	return m.Apply(&statev1.Command{Op: &statev1.Command_EndLockDelay{EndLockDelay: &statev1.EndLockDelay{Name: name, AfterToken: uint64(after), Term: term}}})
}

func renewGrant(m *fsm.Machine, session uint64, name string, token fence.Token, ttlMs int64) fsm.Result {
	return m.Apply(&statev1.Command{Op: &statev1.Command_RenewGrant{RenewGrant: &statev1.RenewGrant{Session: session, Name: name, Token: uint64(token), TtlMs: ttlMs}}})
}

func newLeader(m *fsm.Machine, term uint64) {
	m.Apply(&statev1.Command{Op: &statev1.Command_NewLeader{NewLeader: &statev1.NewLeader{Term: term}}})
}

// A holder that expires leaves its lock in the delay it asked for: a try
// is not granted, a waiter queues and is granted only by the EndLockDelay
// of the current term for that delay.
func TestLockDelay_AfterExpiry(t *testing.T) {
	m := newMachine(t)
	newLeader(m, 2)
	holder, waiter, other := createSession(t, m), createSession(t, m), createSession(t, m)
	first := acquireDelayed(m, holder, 1, "x", false, 5000)
	if !first.Granted {
		t.Fatalf("acquire: %+v", first)
	}
	if got := m.Lock("x").Delay.Holder; got != 5*time.Second {
		t.Fatalf("Lock().Delay.Holder=%v, want 5s", got)
	}
	if res := acquire(m, waiter, 1, "x", true); !res.Queued {
		t.Fatalf("waiter: %+v", res)
	}
	expire(m, holder, 2)
	info := m.Lock("x")
	if info.Held() || !info.Delay.Pending || info.Delay.After != first.Grant.Token || info.Delay.Length != 5*time.Second {
		t.Fatalf("after expiry Lock()=%+v, want free and in a 5s delay after token %d", info, first.Grant.Token)
	}
	if got := m.PendingDelays(); len(got) != 1 || got[0].Name != "x" || got[0].After != first.Grant.Token {
		t.Fatalf("PendingDelays()=%+v", got)
	}
	if res := acquire(m, other, 1, "x", false); res.Granted || res.Queued || res.Holder != 0 || !res.Delayed {
		t.Fatalf("try during the delay=%+v, want not granted, delayed, no holder", res)
	}
	before := mustSnapshot(t, m)
	for _, bad := range []struct {
		name  string
		after fence.Token
		term  uint64
	}{{"x", first.Grant.Token, 1}, {"x", first.Grant.Token + 1, 2}, {"y", first.Grant.Token, 2}} {
		if res := endDelay(m, bad.name, bad.after, bad.term); !res.Ignored {
			t.Fatalf("EndLockDelay%+v=%+v, want ignored", bad, res)
		}
	}
	if !bytes.Equal(mustSnapshot(t, m), before) {
		t.Fatal("an ignored EndLockDelay changed the state")
	}
	if res := endDelay(m, "x", first.Grant.Token, 2); res.Ignored || res.Err != nil {
		t.Fatalf("EndLockDelay=%+v", res)
	}
	info = m.Lock("x")
	if info.Delay.Pending || info.Holder.Session != waiter || info.Holder.Token <= first.Grant.Token {
		t.Fatalf("after the delay Lock()=%+v, want held by the waiter %d with a higher token", info, waiter)
	}
	// The waiter asked for no delay: its expiry frees the lock at once.
	expire(m, waiter, 2)
	if info := m.Lock("x"); info.Delay.Pending || info.Held() {
		t.Fatalf("after the waiter's expiry Lock()=%+v, want gone", info)
	}
}

// A release or a close never starts a delay; a revocation does.
func TestLockDelay_OnlyAfterExpiryOrRevoke(t *testing.T) {
	m := newMachine(t)
	a, b := createSession(t, m), createSession(t, m)
	acquireDelayed(m, a, 1, "released", false, 1000)
	release(m, a, 2, "released")
	acquireDelayed(m, a, 3, "closed", false, 1000)
	m.Apply(&statev1.Command{Op: &statev1.Command_CloseSession{CloseSession: &statev1.CloseSession{Session: a}}})
	for _, name := range []string{"released", "closed"} {
		if info := m.Lock(name); info.Delay.Pending {
			t.Fatalf("Lock(%q)=%+v, want no delay", name, info)
		}
		if res := acquire(m, b, uint64(len(name)), name, false); !res.Granted {
			t.Fatalf("acquire %q after a clean end=%+v", name, res)
		}
	}
	c := createSession(t, m)
	acquireDelayed(m, c, 1, "revoked", false, 1000)
	m.Apply(&statev1.Command{Op: &statev1.Command_Revoke{Revoke: &statev1.Revoke{Name: "revoked"}}})
	if info := m.Lock("revoked"); !info.Delay.Pending {
		t.Fatalf("Lock(revoked)=%+v, want a delay", info)
	}
}

// A waiter's own delay is the one of the grant it is promoted to.
func TestLockDelay_WaiterKeepsItsDelay(t *testing.T) {
	m := newMachine(t)
	a, b := createSession(t, m), createSession(t, m)
	acquire(m, a, 1, "x", false)
	acquireDelayed(m, b, 1, "x", true, 700)
	release(m, a, 2, "x")
	if got := m.Lock("x").Delay.Holder; got != 700*time.Millisecond {
		t.Fatalf("promoted waiter's Delay.Holder=%v, want 700ms", got)
	}
	restored := fsm.New(nil)
	if err := restored.Restore(mustSnapshot(t, m)); err != nil {
		t.Fatal(err)
	}
	expire(restored, b, 0)
	if got := restored.Lock("x").Delay; !got.Pending || got.Length != 700*time.Millisecond {
		t.Fatalf("after restore and expiry Delay=%+v, want a 700ms delay", got)
	}
}

// A lock in its delay has no holder, and that is not "held by session 0":
// a release or a cancelled wait by session 0, or by a session that does
// not exist, grants nothing to the waiter and changes nothing, while the
// delay's own end still does (the committed rapid fail file of
// TestLockDelay_Properties found the release).
func TestLockDelay_NoGrantByNobodysRelease(t *testing.T) {
	m := newMachine(t)
	holder, waiter := createSession(t, m), createSession(t, m)
	first := acquireDelayed(m, holder, 1, "x", false, 5000)
	if res := acquire(m, waiter, 1, "x", true); !res.Queued {
		t.Fatalf("waiter: %+v", res)
	}
	expire(m, holder, 0)
	if info := m.Lock("x"); !info.Delay.Pending || info.Held() {
		t.Fatalf("after expiry Lock()=%+v, want in its delay", info)
	}
	before := mustSnapshot(t, m)
	gone := holder // expired: no longer exists
	for _, c := range []struct {
		what string
		cmd  *statev1.Command
	}{
		{"release by session 0", &statev1.Command{Op: &statev1.Command_Release{Release: &statev1.Release{Name: "x"}}}},
		{"release by session 0 with a seq", &statev1.Command{Op: &statev1.Command_Release{Release: &statev1.Release{Seq: 7, Name: "x"}}}},
		{"release by a session that does not exist", &statev1.Command{Op: &statev1.Command_Release{Release: &statev1.Release{Session: gone, Seq: 2, Name: "x"}}}},
		{"withdrawal by session 0", &statev1.Command{Op: &statev1.Command_Release{Release: &statev1.Release{Seq: 2, WithdrawSeq: 1, Name: "x"}}}},
		{"cancelled wait of session 0", &statev1.Command{Op: &statev1.Command_CancelWait{CancelWait: &statev1.CancelWait{Name: "x"}}}},
		{"cancelled wait of a session that does not exist", &statev1.Command{Op: &statev1.Command_CancelWait{CancelWait: &statev1.CancelWait{Session: gone, Name: "x"}}}},
	} {
		res := m.Apply(c.cmd)
		if res.Granted || res.Grant.Token != 0 || res.Release == fsm.Released {
			t.Fatalf("%s during the delay=%+v, want nothing granted or released", c.what, res)
		}
		if info := m.Lock("x"); info.Held() || !info.Delay.Pending || len(info.Waiters) != 1 {
			t.Fatalf("after a %s Lock()=%+v, want still in its delay with its waiter", c.what, info)
		}
		if !bytes.Equal(mustSnapshot(t, m), before) {
			t.Fatalf("a %s during the delay changed the state", c.what)
		}
	}
	if res := endDelay(m, "x", first.Grant.Token, 0); res.Ignored || res.Err != nil {
		t.Fatalf("EndLockDelay=%+v", res)
	}
	if info := m.Lock("x"); info.Holder.Session != waiter || info.Holder.Token <= first.Grant.Token {
		t.Fatalf("after the delay Lock()=%+v, want held by the waiter %d", info, waiter)
	}
}

// An acquire with a delay out of range is refused and changes nothing.
func TestLockDelay_BadInput(t *testing.T) {
	m := newMachine(t)
	s := createSession(t, m)
	before := mustSnapshot(t, m)
	for _, ms := range []int64{-1, fence.MaxLockDelay.Milliseconds() + 1} {
		res := acquireDelayed(m, s, 1, "x", false, ms)
		if !errors.Is(res.Err, fence.ErrInvalidArgument) {
			t.Fatalf("acquire with a delay of %dms: %+v, want invalid argument", ms, res)
		}
	}
	if !bytes.Equal(mustSnapshot(t, m), before) {
		t.Fatal("a refused acquire changed the state")
	}
}

// A snapshot whose delay no command could reach is refused.
func TestLockDelay_RestoreRefusesUnreachable(t *testing.T) {
	m := newMachine(t)
	s := createSession(t, m)
	acquireDelayed(m, s, 1, "x", false, 1000)
	good := mustSnapshot(t, m)
	for name, damage := range map[string]func(l *statev1.Lock){
		"delay while held":        func(l *statev1.Lock) { l.DelayAfterToken, l.DelayMs = 1, 1000 },
		"delay too long":          func(l *statev1.Lock) { l.LockDelayMs = 60001 },
		"waiter delay not queued": func(l *statev1.Lock) { l.WaiterDelays = []*statev1.WaiterDelay{{Session: s, LockDelayMs: 5}} },
		"delay length, no delay":  func(l *statev1.Lock) { l.DelayMs = 5 },
	} {
		var st statev1.State
		if err := proto.Unmarshal(good, &st); err != nil {
			t.Fatal(err)
		}
		damage(st.Locks[0])
		b, _ := proto.Marshal(&st)
		if err := fsm.New(nil).Restore(b); err == nil {
			t.Errorf("%s: Restore accepted it", name)
		}
	}
}

// A renewal by the holder keeps the token and sets the TTL; one by another
// session, or under another token, changes nothing.
func TestRenewGrant(t *testing.T) {
	m := newMachine(t)
	a, b := createSession(t, m), createSession(t, m)
	g := acquire(m, a, 1, "x", false).Grant
	res := renewGrant(m, a, "x", g.Token, 5000)
	if !res.Granted || res.Grant.Token != g.Token || res.Grant.TTL != 5*time.Second {
		t.Fatalf("renew=%+v, want token %d with ttl 5s", res, g.Token)
	}
	if info, _ := m.Session(a); info.TTLMs != 5000 {
		t.Fatalf("session TTL=%d, want 5000", info.TTLMs)
	}
	before, last := mustSnapshot(t, m), m.LastToken()
	for _, r := range []struct {
		session uint64
		token   fence.Token
	}{{b, 0}, {a, g.Token + 1}} {
		if res := renewGrant(m, r.session, "x", r.token, 9000); res.Granted || res.Err != nil || res.Holder != a {
			t.Fatalf("renew%+v=%+v, want not owned", r, res)
		}
	}
	if res := renewGrant(m, a, "x", 0, 50); !errors.Is(res.Err, fence.ErrInvalidArgument) {
		t.Fatalf("renew with a TTL of 50ms=%+v, want invalid argument", res)
	}
	if !bytes.Equal(mustSnapshot(t, m), before) || m.LastToken() != last {
		t.Fatal("a renewal that was not the holder's changed the state")
	}
}
