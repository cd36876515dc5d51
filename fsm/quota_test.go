package fsm_test

import (
	"errors"
	"testing"

	"pgregory.net/rapid"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

var testQuota = &statev1.Quota{Owner: "10.0.0.1", MaxSessions: 2, MaxHeld: 2, MaxWaiting: 1}

func ownedSession(m *fsm.Machine, q *statev1.Quota) fsm.Result {
	return m.Apply(&statev1.Command{Op: &statev1.Command_CreateSession{CreateSession: &statev1.CreateSession{TtlMs: 1000, Quota: q}}})
}

func quotaAcquire(m *fsm.Machine, session uint64, name string, wait bool, q *statev1.Quota) fsm.Result {
	return m.Apply(&statev1.Command{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Session: session, Name: name, Wait: wait, TtlMs: 1000, Quota: q}}})
}

func wantQuotaError(t *testing.T, res fsm.Result, resource string) {
	t.Helper()
	var qe *fsm.QuotaError
	if !errors.As(res.Err, &qe) || !errors.Is(res.Err, fence.ErrLimitExceeded) || qe.Resource != resource {
		t.Fatalf("result %+v: want a QuotaError on %s matching ErrLimitExceeded", res, resource)
	}
}

// restored returns a new machine restored from a snapshot of m.
func restored(t *testing.T, m *fsm.Machine) *fsm.Machine {
	t.Helper()
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	r := fsm.New(nil)
	if err := r.Restore(snap); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestQuota_SessionsPerOwner(t *testing.T) {
	m := newMachine(t)
	a, b := ownedSession(m, testQuota), ownedSession(m, testQuota)
	if a.Err != nil || b.Err != nil {
		t.Fatalf("create: %v, %v", a.Err, b.Err)
	}
	wantQuotaError(t, ownedSession(m, testQuota), fsm.QuotaSessions)
	// A per-grant session counts too, and its refusal leaves nothing.
	wantQuotaError(t, quotaAcquire(m, 0, "job", false, testQuota), fsm.QuotaSessions)
	if got := m.SessionCount(); got != 2 {
		t.Fatalf("SessionCount()=%d after refusals, want 2", got)
	}
	// Another owner is not limited by this one's sessions.
	other := &statev1.Quota{Owner: "10.0.0.2", MaxSessions: 2}
	if res := ownedSession(m, other); res.Err != nil {
		t.Fatalf("other owner: %v", res.Err)
	}
	// Ending a session frees its place.
	if res := m.Apply(&statev1.Command{Op: &statev1.Command_CloseSession{CloseSession: &statev1.CloseSession{Session: a.Session}}}); !res.Ended {
		t.Fatalf("close: %+v", res)
	}
	if res := ownedSession(m, testQuota); res.Err != nil {
		t.Fatalf("create after close: %v", res.Err)
	}
	// No quota (an older leader's command) is no limit.
	for range 3 {
		if res := ownedSession(m, nil); res.Err != nil {
			t.Fatalf("create without quota: %v", res.Err)
		}
	}
}

func TestQuota_GrantsAndWaitersPerOwner(t *testing.T) {
	m := newMachine(t)
	s1, s2 := ownedSession(m, testQuota).Session, ownedSession(m, testQuota).Session
	for _, name := range []string{"a", "b"} {
		if res := quotaAcquire(m, s1, name, false, testQuota); !res.Granted {
			t.Fatalf("acquire %s: %+v", name, res)
		}
	}
	// The owner holds 2 over its sessions: a third grant is refused,
	// and the refusal leaves no lock behind.
	wantQuotaError(t, quotaAcquire(m, s2, "c", false, testQuota), fsm.QuotaHeld)
	if info := m.Lock("c"); info.Held() || len(info.Waiters) > 0 {
		t.Fatalf("lock c after refusal: %+v", info)
	}
	// Re-acquiring what a session holds takes no new grant.
	if res := quotaAcquire(m, s1, "a", false, testQuota); !res.Granted {
		t.Fatalf("re-acquire a: %+v", res)
	}
	// Waiters: one place in a queue, then refused.
	other := createSession(t, m)
	if res := acquire(m, other, 1, "x", false); !res.Granted {
		t.Fatalf("other acquire x: %+v", res)
	}
	if res := acquire(m, other, 2, "y", false); !res.Granted {
		t.Fatalf("other acquire y: %+v", res)
	}
	if res := quotaAcquire(m, s2, "x", true, testQuota); !res.Queued {
		t.Fatalf("queue on x: %+v", res)
	}
	if res := quotaAcquire(m, s2, "x", true, testQuota); !res.Queued {
		t.Fatalf("queue again on x (already queued): %+v", res)
	}
	wantQuotaError(t, quotaAcquire(m, s2, "y", true, testQuota), fsm.QuotaWaiting)
	if got := m.Lock("y").Waiters; len(got) != 0 {
		t.Fatalf("waiters of y after refusal: %v", got)
	}
	if s, h, w := m.Usage(testQuota.Owner); s != 2 || h != 2 || w != 1 {
		t.Fatalf("Usage()=%d,%d,%d, want 2,2,1", s, h, w)
	}
	// The counts survive a snapshot.
	r := restored(t, m)
	if s, h, w := r.Usage(testQuota.Owner); s != 2 || h != 2 || w != 1 {
		t.Fatalf("restored Usage()=%d,%d,%d, want 2,2,1", s, h, w)
	}
	// A promoted waiter is never refused; ending the sessions frees all.
	if res := release(m, other, 3, "x"); res.Release != fsm.Released {
		t.Fatalf("release x: %+v", res)
	}
	if info := m.Lock("x"); info.Holder.Session != s2 {
		t.Fatalf("x after release: %+v, want held by %d", info, s2)
	}
	if s, h, w := m.Usage(testQuota.Owner); s != 2 || h != 3 || w != 0 {
		t.Fatalf("Usage() after promotion=%d,%d,%d, want 2,3,0", s, h, w)
	}
	for _, s := range []uint64{s1, s2} {
		m.Apply(&statev1.Command{Op: &statev1.Command_CloseSession{CloseSession: &statev1.CloseSession{Session: s}}})
	}
	if s, h, w := m.Usage(testQuota.Owner); s != 0 || h != 0 || w != 0 {
		t.Fatalf("Usage() after close=%d,%d,%d, want 0,0,0", s, h, w)
	}
}

func kvWriteLimited(m *fsm.Machine, key, value string, del bool, tok uint64, l *statev1.KVLimits) fsm.Result {
	return m.Apply(&statev1.Command{Op: &statev1.Command_KvWrite{KvWrite: &statev1.KVWrite{Key: key, Value: []byte(value), Delete: del, Token: tok, Limits: l}}})
}

func TestKVLimits_KeysAndBytes(t *testing.T) {
	m := newMachine(t)
	s := createSession(t, m)
	tok := uint64(acquire(m, s, 1, "w", false).Grant.Token)
	keys := &statev1.KVLimits{MaxKeys: 2}
	for _, k := range []string{"a", "b"} {
		if res := kvWriteLimited(m, k, "v", false, tok, keys); res.Err != nil {
			t.Fatalf("put %s: %v", k, res.Err)
		}
	}
	// A third key, even a delete that would leave a tombstone, is refused.
	for _, del := range []bool{false, true} {
		var ke *fsm.KVLimitError
		if res := kvWriteLimited(m, "c", "v", del, tok, keys); !errors.As(res.Err, &ke) || ke.Resource != fsm.KVKeys || !errors.Is(res.Err, fence.ErrLimitExceeded) {
			t.Fatalf("third key (delete %v): %v, want a KVLimitError on keys", del, res.Err)
		}
	}
	if m.KV("c").Version != 0 {
		t.Fatal("refused write left key c")
	}
	// Existing keys can still be written and deleted.
	if res := kvWriteLimited(m, "a", "longer value", false, tok, keys); res.Err != nil {
		t.Fatalf("overwrite a: %v", res.Err)
	}
	if res := kvWriteLimited(m, "b", "", true, tok, keys); res.Err != nil {
		t.Fatalf("delete b: %v", res.Err)
	}
	// Bytes: keys plus values: a(1)+"longer value"(12) + b(1) = 14 now.
	bytes := &statev1.KVLimits{MaxBytes: 16}
	if res := kvWriteLimited(m, "b", "vv", false, tok, bytes); res.Err != nil {
		t.Fatalf("put b within the bytes: %v", res.Err)
	}
	var ke *fsm.KVLimitError
	if res := kvWriteLimited(m, "b", "vvv", false, tok, bytes); !errors.As(res.Err, &ke) || ke.Resource != fsm.KVBytes {
		t.Fatalf("put b past the bytes: %v, want a KVLimitError on bytes", res.Err)
	}
	// Shrinking is allowed even above a lower limit; the count survives a
	// snapshot (a growing write is refused by the restored machine too).
	if res := kvWriteLimited(m, "a", "x", false, tok, &statev1.KVLimits{MaxBytes: 1}); res.Err != nil {
		t.Fatalf("shrink a: %v", res.Err)
	}
	r := restored(t, m)
	// Now a(1)+x(1)+b(1)+vv(2) = 5.
	for _, mm := range []*fsm.Machine{m, r} {
		if res := kvWriteLimited(mm, "a", "xx", false, tok, &statev1.KVLimits{MaxBytes: 5}); res.Err == nil {
			t.Fatal("growing past 5 bytes allowed")
		}
		if res := kvWriteLimited(mm, "a", "xx", false, tok, &statev1.KVLimits{MaxBytes: 6}); res.Err != nil {
			t.Fatalf("growing to 6 bytes: %v", res.Err)
		}
	}
}

// TestQuota_CountsMatchTheState runs random commands of two owners under
// small quotas and checks after each that every owner's counts equal what
// its live sessions hold and wait for, and that no owner has more sessions
// than its limit.
func TestQuota_CountsMatchTheState(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := fsm.New(nil)
		m.Apply(initCommand(0))
		owners := []string{"10.0.0.1", "10.0.0.2"}
		var sessions []uint64
		quota := func(t *rapid.T) *statev1.Quota {
			return &statev1.Quota{Owner: rapid.SampledFrom(owners).Draw(t, "owner"), MaxSessions: 3, MaxHeld: 2, MaxWaiting: 2}
		}
		session := func(t *rapid.T) uint64 {
			if len(sessions) == 0 || rapid.IntRange(0, 9).Draw(t, "per-grant") == 0 {
				return 0
			}
			return rapid.SampledFrom(sessions).Draw(t, "session")
		}
		for range rapid.IntRange(1, 80).Draw(t, "steps") {
			name := rapid.SampledFrom(names).Draw(t, "name")
			var res fsm.Result
			switch rapid.IntRange(0, 5).Draw(t, "op") {
			case 0:
				res = ownedSession(m, quota(t))
			case 1, 2:
				res = quotaAcquire(m, session(t), name, rapid.Bool().Draw(t, "wait"), quota(t))
			case 3:
				res = release(m, session(t), 0, name)
			case 4:
				res = m.Apply(&statev1.Command{Op: &statev1.Command_CancelWait{CancelWait: &statev1.CancelWait{Session: session(t), Name: name}}})
			case 5:
				res = expire(m, session(t), 0)
			}
			if res.Session != 0 && res.Err == nil {
				sessions = append(sessions, res.Session)
			}
			for _, o := range owners {
				var n, held, waiting int
				for _, si := range m.Sessions() {
					if si.Owner == o {
						n, held, waiting = n+1, held+len(si.Held), waiting+len(si.Waiting)
					}
				}
				gs, gh, gw := m.Usage(o)
				if gs != n || gh != held || gw != waiting {
					t.Fatalf("Usage(%s)=%d,%d,%d, but its sessions hold %d,%d,%d", o, gs, gh, gw, n, held, waiting)
				}
				if n > 3 {
					t.Fatalf("%s has %d sessions, above its limit 3", o, n)
				}
			}
		}
	})
}

// A per-grant withdrawal that creates a session for its request id is held
// to the caller's session quota like any other session: withdrawals cannot
// be used to create sessions past it.
func TestQuota_WithdrawalSessionsCount(t *testing.T) {
	m := newMachine(t)
	withdraw := func(requestID string) fsm.Result {
		return m.Apply(&statev1.Command{Op: &statev1.Command_Release{Release: &statev1.Release{
			Name: "job", WithdrawSeq: 1, RequestId: requestID, TtlMs: 1000, Quota: testQuota}}})
	}
	for _, id := range []string{"r1", "r2"} {
		if res := withdraw(id); res.Err != nil {
			t.Fatalf("withdraw %s: %v", id, res.Err)
		}
	}
	wantQuotaError(t, withdraw("r3"), fsm.QuotaSessions)
	if got := m.SessionCount(); got != 2 {
		t.Fatalf("SessionCount()=%d, want 2", got)
	}
}
