package fsm_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

func semAcquire(m *fsm.Machine, session, seq uint64, name string, capacity, permits uint32, wait bool) fsm.Result {
	return m.Apply(&statev1.Command{Op: &statev1.Command_SemAcquire{SemAcquire: &statev1.SemAcquire{
		Session: session, Seq: seq, Name: name, Capacity: capacity, Permits: permits, Wait: wait}}})
}

func semRelease(m *fsm.Machine, session, seq uint64, name string) fsm.Result {
	return m.Apply(&statev1.Command{Op: &statev1.Command_SemRelease{SemRelease: &statev1.SemRelease{Session: session, Seq: seq, Name: name}}})
}

func slotsOf(ps []fsm.Permit) []uint32 {
	var out []uint32
	for _, p := range ps {
		out = append(out, p.Slot)
	}
	return out
}

// Permits take the lowest free slots, each its own token in slot order
// with kind permit and scope name/slot; a freed slot is the next one
// taken, under a higher token.
func TestSemaphore_SlotsAndTokens(t *testing.T) {
	m := newMachine(t)
	a, b, c := createSession(t, m), createSession(t, m), createSession(t, m)
	ra := semAcquire(m, a, 1, "pool", 4, 2, false)
	rb := semAcquire(m, b, 1, "pool", 4, 1, false)
	if !ra.Granted || !rb.Granted || fmt.Sprint(slotsOf(ra.Permits)) != "[0 1]" || fmt.Sprint(slotsOf(rb.Permits)) != "[2]" {
		t.Fatalf("a=%+v b=%+v, want slots [0 1] and [2]", ra.Permits, rb.Permits)
	}
	if ra.Permits[0].Grant.Token >= ra.Permits[1].Grant.Token || ra.Permits[1].Grant.Token >= rb.Permits[0].Grant.Token {
		t.Fatalf("tokens %v %v not increasing", ra.Permits, rb.Permits)
	}
	p := ra.Permits[1].Grant
	if p.Kind != fence.KindPermit || p.Scope != "pool/1" || p.Name != "pool" || !fence.ScopeCovers(p.Scope, "pool/1") || fence.ScopeCovers(p.Scope, "pool/10") {
		t.Fatalf("permit grant %+v, want kind permit, scope pool/1", p)
	}
	if res := semRelease(m, a, 2, "pool"); res.Release != fsm.Released {
		t.Fatalf("release: %+v", res)
	}
	rc := semAcquire(m, c, 1, "pool", 4, 3, false)
	if !rc.Granted || fmt.Sprint(slotsOf(rc.Permits)) != "[0 1 3]" || rc.Permits[0].Grant.Token <= rb.Permits[0].Grant.Token {
		t.Fatalf("c=%+v, want slots [0 1 3] above token %d", rc.Permits, rb.Permits[0].Grant.Token)
	}
	if got := m.Semaphore("pool"); got.Capacity != 4 || len(got.Permits) != 4 {
		t.Fatalf("Semaphore(pool)=%+v", got)
	}
}

// A big request at the head is not overtaken by small ones behind it;
// waiters are served in arrival order as permits free up, pushed.
func TestSemaphore_FIFOWithoutOvertaking(t *testing.T) {
	obs := &grantLog{}
	m := fsm.New(obs)
	m.Apply(initCommand(0))
	holder := createSession(t, m)
	big, small1, small2 := createSession(t, m), createSession(t, m), createSession(t, m)
	semAcquire(m, holder, 1, "pool", 3, 2, false)
	if res := semAcquire(m, big, 1, "pool", 3, 3, true); !res.Queued {
		t.Fatalf("big: %+v, want queued", res)
	}
	// One permit is free, but the big request waits at the head.
	if res := semAcquire(m, small1, 1, "pool", 3, 1, true); !res.Queued {
		t.Fatalf("small1: %+v, want queued behind the big request", res)
	}
	if res := semAcquire(m, small2, 1, "pool", 3, 1, false); res.Granted || res.Available != 1 {
		t.Fatalf("small2 try: %+v, want not granted with 1 available", res)
	}
	if w := m.Semaphore("pool").Waiters; fmt.Sprint(w) != fmt.Sprint([]fsm.SemaphoreWaiter{{Session: big, Permits: 3}, {Session: small1, Permits: 1}}) {
		t.Fatalf("waiters %v", w)
	}
	obs.grants = nil
	semRelease(m, holder, 2, "pool")
	if got := obs.sessions(); fmt.Sprint(got) != fmt.Sprint([]uint64{big, big, big}) {
		t.Fatalf("after the release, grants went to %v, want the big request's 3", got)
	}
	obs.grants = nil
	semRelease(m, big, 2, "pool")
	if got := obs.sessions(); fmt.Sprint(got) != fmt.Sprint([]uint64{small1}) {
		t.Fatalf("after big's release, grants went to %v, want small1", got)
	}
}

type grantLog struct {
	fsm.NopObserver
	grants []fence.Grant
}

func (g *grantLog) Granted(gr fence.Grant) { g.grants = append(g.grants, gr) }

func (g *grantLog) sessions() []uint64 {
	var out []uint64
	for _, gr := range g.grants {
		out = append(out, gr.Session)
	}
	return out
}

// Bad input is refused with a clear error and changes nothing: capacity 0
// or above the maximum, permits 0 or above the capacity, a capacity other
// than the one in use (both numbers in the message), a bad name, a second
// acquire of another size by a holder. When every permit is gone a new
// capacity may be set.
func TestSemaphore_BadInputChangesNothing(t *testing.T) {
	m := newMachine(t)
	a, b, w := createSession(t, m), createSession(t, m), createSession(t, m)
	semAcquire(m, a, 1, "pool", 3, 2, false)
	if res := semAcquire(m, w, 1, "pool", 3, 2, true); !res.Queued {
		t.Fatalf("w: %+v, want queued", res)
	}
	perGrant := func(capacity, permits uint32) *statev1.Command {
		return &statev1.Command{Op: &statev1.Command_SemAcquire{SemAcquire: &statev1.SemAcquire{Name: "pool", Capacity: capacity, Permits: permits, TtlMs: 1000, RequestId: "x"}}}
	}
	for _, tc := range []struct {
		what string
		cmd  *statev1.Command
		is   error
		say  []string
	}{
		{"capacity 0", semCmd(b, 1, "other", 0, 1), fence.ErrInvalidArgument, []string{"capacity is 0", "1 to 1000000"}},
		{"capacity above the maximum", semCmd(b, 1, "other", fsm.MaxCapacity+1, 1), fence.ErrInvalidArgument, []string{"capacity is 1000001"}},
		{"permits 0", semCmd(b, 1, "pool", 3, 0), fence.ErrInvalidArgument, []string{"0 permits asked", "capacity 3"}},
		{"permits above the capacity", semCmd(b, 1, "pool", 3, 4), fence.ErrInvalidArgument, []string{"4 permits asked", "capacity 3"}},
		{"capacity mismatch", semCmd(b, 1, "pool", 5, 1), fence.ErrCapacityMismatch, []string{"capacity 3", "capacity 5", `"pool"`}},
		{"capacity mismatch, per-grant", perGrant(5, 1), fence.ErrCapacityMismatch, []string{"capacity 3", "capacity 5"}},
		{"bad name", semCmd(b, 1, "", 3, 1), fence.ErrInvalidArgument, nil},
		{"a holder asks for another count", semCmd(a, 2, "pool", 3, 1), fence.ErrInvalidArgument, []string{"already holds 2 permits"}},
		{"unknown session", semCmd(99, 1, "pool", 3, 1), fence.ErrSessionNotFound, nil},
		{"a waiter asks for another count", semCmd(w, 2, "pool", 3, 1), fence.ErrInvalidArgument, []string{"already waits for 2 permits"}},
	} {
		before := mustSnapshot(t, m)
		res := m.Apply(tc.cmd)
		if !errors.Is(res.Err, tc.is) {
			t.Errorf("%s: %v, want %v", tc.what, res.Err, tc.is)
			continue
		}
		for _, s := range tc.say {
			if !strings.Contains(res.Err.Error(), s) {
				t.Errorf("%s: %q does not say %q", tc.what, res.Err, s)
			}
		}
		if after := mustSnapshot(t, m); !bytes.Equal(before, after) {
			t.Errorf("%s: the refused command changed the state", tc.what)
		}
	}
	// All permits gone: a new capacity is taken.
	semRelease(m, w, 3, "pool")
	semRelease(m, a, 3, "pool")
	if res := semAcquire(m, b, 2, "pool", 5, 5, false); !res.Granted || res.Capacity != 5 {
		t.Fatalf("acquire with a new capacity after every release: %+v", res)
	}
}

func semCmd(session, seq uint64, name string, capacity, permits uint32) *statev1.Command {
	return &statev1.Command{Op: &statev1.Command_SemAcquire{SemAcquire: &statev1.SemAcquire{Session: session, Seq: seq, Name: name, Capacity: capacity, Permits: permits}}}
}

// Release answers released, already_released and not_owned; a retried
// release gives its first answer; a semaphore and a lock of the same name
// are apart, and so are their remembered requests.
func TestSemaphore_ReleaseAnswers(t *testing.T) {
	m := newMachine(t)
	a, b := createSession(t, m), createSession(t, m)
	if res := semRelease(m, a, 1, "pool"); res.Release != fsm.AlreadyReleased {
		t.Fatalf("release of an unused semaphore: %v", res.Release)
	}
	semAcquire(m, a, 2, "pool", 2, 1, false)
	if res := acquire(m, b, 1, "pool", false); !res.Granted {
		t.Fatalf("the lock pool next to the semaphore pool: %+v", res)
	}
	if res := semRelease(m, b, 2, "pool"); res.Release != fsm.NotOwned {
		t.Fatalf("release by a non-holder: %v, want not_owned", res.Release)
	}
	if res := semRelease(m, a, 3, "pool"); res.Release != fsm.Released {
		t.Fatalf("release by the holder: %v", res.Release)
	}
	if res := semRelease(m, a, 3, "pool"); res.Release != fsm.Released {
		t.Fatalf("retried release: %v, want its first answer released", res.Release)
	}
	if res := semRelease(m, a, 4, "pool"); res.Release != fsm.AlreadyReleased {
		t.Fatalf("second release: %v", res.Release)
	}
	if info := m.Lock("pool"); info.Holder.Session != b {
		t.Fatalf("the semaphore's release touched the lock: %+v", info)
	}
}

// Per-grant permits (session 0) live in a session of their own TTL, are
// released when it expires, and a retry by request id returns them.
func TestSemaphore_PerGrantPermits(t *testing.T) {
	m := newMachine(t)
	cmd := &statev1.Command{Op: &statev1.Command_SemAcquire{SemAcquire: &statev1.SemAcquire{Name: "pool", Capacity: 2, Permits: 2, TtlMs: 500, RequestId: "once"}}}
	res := m.Apply(cmd)
	if !res.Granted || res.Session == 0 || res.Permits[0].Grant.TTL.Milliseconds() != 500 {
		t.Fatalf("per-grant acquire: %+v", res)
	}
	last := m.LastToken()
	if again := m.Apply(cmd); !again.Granted || fmt.Sprint(again.Permits) != fmt.Sprint(res.Permits) || m.LastToken() != last {
		t.Fatalf("retry: %+v, want the same permits and no new token", again)
	}
	if r := expire(m, res.Session, 0); !r.Ended {
		t.Fatalf("expire: %+v", r)
	}
	if info := m.Semaphore("pool"); info.Capacity != 0 {
		t.Fatalf("after the expiry: %+v, want not in use", info)
	}
	// A try that is not granted leaves no session behind.
	s := createSession(t, m)
	semAcquire(m, s, 1, "pool", 2, 2, false)
	n := m.SessionCount()
	if r := m.Apply(&statev1.Command{Op: &statev1.Command_SemAcquire{SemAcquire: &statev1.SemAcquire{Name: "pool", Capacity: 2, Permits: 1, TtlMs: 500, RequestId: "late"}}}); r.Granted || r.Err != nil {
		t.Fatalf("per-grant try on a full semaphore: %+v", r)
	}
	if m.SessionCount() != n {
		t.Fatalf("a per-grant try that was not granted left a session")
	}
}

// A withdrawal undoes exactly its acquire, whichever is applied first.
func TestSemaphore_Withdraw(t *testing.T) {
	m := newMachine(t)
	a, b := createSession(t, m), createSession(t, m)
	semAcquire(m, a, 1, "pool", 1, 1, false)
	semAcquire(m, b, 1, "pool", 1, 1, true) // queued
	withdraw := func(s, seq, w uint64) fsm.Result {
		return m.Apply(&statev1.Command{Op: &statev1.Command_SemRelease{SemRelease: &statev1.SemRelease{Session: s, Seq: seq, Name: "pool", WithdrawSeq: w}}})
	}
	withdraw(b, 2, 1)
	if w := m.Semaphore("pool").Waiters; len(w) != 0 {
		t.Fatalf("the withdrawn wait is still queued: %v", w)
	}
	// Withdrawn before it arrives: refused when it does.
	withdraw(b, 3, 4)
	before := mustSnapshot(t, m)
	if res := semAcquire(m, b, 4, "pool", 1, 1, true); res.Err == nil {
		t.Fatalf("a withdrawn acquire was applied: %+v", res)
	}
	if !bytes.Equal(before, mustSnapshot(t, m)) {
		t.Fatal("the refused withdrawn acquire changed the state")
	}
	// Granted: the withdrawal releases it.
	if res := withdraw(a, 2, 1); res.Release != fsm.Released {
		t.Fatalf("withdrawal of a's granted acquire: %v", res.Release)
	}
	if info := m.Semaphore("pool"); info.Capacity != 0 {
		t.Fatalf("after the withdrawals: %+v", info)
	}
}

var semaphoreGolden = filepath.Join("testdata", "snapshot-semaphore-v1.bin")

// semaphoreState drives a machine through every part of a semaphore's
// state: permits in scattered slots of several sessions, a per-grant
// holder, waiters for several permits, remembered requests.
func semaphoreState(t *testing.T) *fsm.Machine {
	m := fsm.New(nil)
	m.Apply(&statev1.Command{Op: &statev1.Command_Init{Init: &statev1.Init{Issuer: "golden", TokenFloor: 40}}})
	a, b, c := createSession(t, m), createSession(t, m), createSession(t, m)
	at := func(ms int64, cmd *statev1.Command) { cmd.NowUnixMs = ms; m.Apply(cmd) }
	at(1000, semCmd(a, 1, "pool", 4, 2))
	at(1001, semCmd(b, 1, "pool", 4, 1))
	at(1002, &statev1.Command{Op: &statev1.Command_SemAcquire{SemAcquire: &statev1.SemAcquire{Name: "pool", Capacity: 4, Permits: 1, TtlMs: 2000, RequestId: "one-shot"}}})
	at(1003, &statev1.Command{Op: &statev1.Command_SemRelease{SemRelease: &statev1.SemRelease{Session: a, Seq: 2, Name: "pool"}}})
	at(1004, semCmd(c, 1, "pool", 4, 1))
	at(1005, &statev1.Command{Op: &statev1.Command_SemAcquire{SemAcquire: &statev1.SemAcquire{Session: a, Seq: 3, Name: "pool", Capacity: 4, Permits: 3, Wait: true}}})
	at(1006, &statev1.Command{Op: &statev1.Command_SemAcquire{SemAcquire: &statev1.SemAcquire{Session: c, Seq: 2, Name: "solo", Capacity: 1, Permits: 1}}})
	at(1007, &statev1.Command{Op: &statev1.Command_SemAcquire{SemAcquire: &statev1.SemAcquire{Session: b, Seq: 2, Name: "solo", Capacity: 1, Permits: 1, Wait: true}}})
	return m
}

// A snapshot with semaphores restores and snapshots to the same bytes,
// and the restored state serves waiters as the original would.
func TestSemaphore_GoldenSnapshot(t *testing.T) {
	data := mustSnapshot(t, semaphoreState(t))
	if *update {
		if err := os.WriteFile(semaphoreGolden, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden, err := os.ReadFile(semaphoreGolden)
	if err != nil {
		t.Fatal(err)
	}
	// The golden file predates format versions (version 1 by default);
	// a snapshot now ends with its format version.
	if !bytes.Equal(data, versioned(golden)) {
		t.Errorf("the same commands now snapshot to other bytes than %s", semaphoreGolden)
	}
	m := fsm.New(nil)
	if err := m.Restore(golden); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if again := mustSnapshot(t, m); !bytes.Equal(again, versioned(golden)) {
		t.Fatal("a restored snapshot does not snapshot to the same bytes")
	}
	info := m.Semaphore("pool")
	if info.Capacity != 4 || fmt.Sprint(slotsOf(info.Permits)) != "[0 2 3]" || len(info.Waiters) != 1 || info.Waiters[0].Permits != 3 {
		t.Fatalf("restored pool: %+v", info)
	}
	// Releasing b and c frees enough for a's 3.
	semRelease(m, 2, 3, "pool")
	semRelease(m, 3, 3, "pool")
	if ps, _ := m.SemaphoreHolding("pool", 1); len(ps) != 3 {
		t.Fatalf("a holds %v after the releases, want 3 permits", ps)
	}
}

// An owner's quota counts a session's permits of one semaphore as one
// grant (held with the owner's locks) and a queued acquire as one waiter;
// a refusal changes nothing.
func TestSemaphore_Quota(t *testing.T) {
	m := newMachine(t)
	q := &statev1.Quota{Owner: "10.0.0.1", MaxHeld: 2, MaxWaiting: 1}
	a, b := ownedSession(m, q).Session, ownedSession(m, q).Session
	acq := func(s, seq uint64, name string, capacity, permits uint32, wait bool) fsm.Result {
		return m.Apply(&statev1.Command{Op: &statev1.Command_SemAcquire{SemAcquire: &statev1.SemAcquire{Session: s, Seq: seq, Name: name, Capacity: capacity, Permits: permits, Wait: wait, Quota: q}}})
	}
	if res := acq(a, 1, "pool", 4, 3, false); !res.Granted {
		t.Fatalf("3 permits: %+v", res)
	}
	if res := quotaAcquire(m, b, "job", false, q); !res.Granted {
		t.Fatalf("a lock next to the permits: %+v", res)
	}
	if _, held, _ := m.Usage("10.0.0.1"); held != 2 {
		t.Fatalf("held %d, want 2 (3 permits count as one grant, plus the lock)", held)
	}
	before := mustSnapshot(t, m)
	wantQuotaError(t, acq(b, 2, "other", 2, 1, false), fsm.QuotaHeld)
	if !bytes.Equal(before, mustSnapshot(t, m)) {
		t.Fatal("a refused acquire changed the state")
	}
	if res := acq(b, 3, "pool", 4, 2, true); !res.Queued {
		t.Fatalf("2 permits with 1 free: %+v, want queued", res)
	}
	c := ownedSession(m, q).Session
	wantQuotaError(t, acq(c, 1, "pool", 4, 1, true), fsm.QuotaWaiting)
}

// A permit's token writes the fenced kv under its slot's scope (name/slot
// and below) while the permit is live, and nothing else: not another
// slot, not the semaphore's name, and nothing once released.
func TestSemaphore_PermitScopeInTheKV(t *testing.T) {
	m := newMachine(t)
	a, b := createSession(t, m), createSession(t, m)
	ra := semAcquire(m, a, 1, "pool", 2, 1, false)
	rb := semAcquire(m, b, 1, "pool", 2, 1, false)
	zero, one := ra.Permits[0].Grant.Token, rb.Permits[0].Grant.Token
	for _, tc := range []struct {
		key string
		tok fence.Token
		ok  bool
	}{
		{"pool/1", one, true}, {"pool/1/conn", one, true}, {"pool/0", zero, true},
		{"pool/0", one, false}, {"pool", one, false}, {"pool/10", one, false},
	} {
		res := scopedPut(m, tc.key, "", tc.tok)
		if (res.Err == nil) != tc.ok || (!tc.ok && !errors.Is(res.Err, fence.ErrScopeMismatch)) {
			t.Errorf("write %q with token %d: %v, want ok=%v", tc.key, tc.tok, res.Err, tc.ok)
		}
	}
	semRelease(m, b, 2, "pool")
	if res := scopedPut(m, "pool/1", "", one); !errors.Is(res.Err, fence.ErrScopeMismatch) {
		t.Errorf("write with a released permit's token: %v, want a scope mismatch", res.Err)
	}
}
