package fsm_test

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

func rwAcquire(m *fsm.Machine, session, seq uint64, name string, write, wait bool) fsm.Result {
	return m.Apply(&statev1.Command{Op: &statev1.Command_RwAcquire{RwAcquire: &statev1.RWAcquire{Session: session, Seq: seq, Name: name, Mode: rwMode(write), Wait: wait}}})
}

func rwRelease(m *fsm.Machine, session, seq uint64, name string) fsm.Result {
	return m.Apply(&statev1.Command{Op: &statev1.Command_RwRelease{RwRelease: &statev1.RWRelease{Session: session, Seq: seq, Name: name}}})
}

func mustGrant(t *testing.T, what string, res fsm.Result) fence.Grant {
	t.Helper()
	if res.Err != nil || !res.Granted {
		t.Fatalf("%s = %+v, want granted", what, res)
	}
	return res.Grant
}

func mustQueue(t *testing.T, what string, res fsm.Result) {
	t.Helper()
	if res.Err != nil || !res.Queued {
		t.Fatalf("%s = %+v, want queued", what, res)
	}
}

func readerSessions(info fsm.RWLockInfo) []uint64 {
	var out []uint64
	for _, g := range info.Readers {
		out = append(out, g.Session)
	}
	return out
}

// Readers share; a waiting writer stops later readers (no writer
// starvation); when the readers leave the writer alone is admitted, with
// a token above theirs; when it leaves, the readers queued together behind
// it are admitted together, each with its own token, up to the next
// writer.
func TestRWLock_FairQueue(t *testing.T) {
	m := newMachine(t)
	r1, r2, w1, r3, r4, w2, r5 := createSession(t, m), createSession(t, m), createSession(t, m), createSession(t, m), createSession(t, m), createSession(t, m), createSession(t, m)
	g1 := mustGrant(t, "first reader", rwAcquire(m, r1, 1, "db", false, true))
	g2 := mustGrant(t, "second reader", rwAcquire(m, r2, 1, "db", false, true))
	if g1.Kind != fence.KindRead || g1.Scope != "db" || g2.Token <= g1.Token {
		t.Fatalf("reader grants %+v and %+v, want kind read, scope db, tokens rising", g1, g2)
	}
	mustQueue(t, "writer behind readers", rwAcquire(m, w1, 1, "db", true, true))
	mustQueue(t, "reader behind the waiting writer", rwAcquire(m, r3, 1, "db", false, true))
	if res := rwAcquire(m, r4, 1, "db", false, false); res.Granted || res.Queued || res.Err != nil {
		t.Fatalf("try-read behind the waiting writer = %+v, want not granted", res)
	}
	mustQueue(t, "second reader behind the writer", rwAcquire(m, r4, 2, "db", false, true))
	mustQueue(t, "second writer", rwAcquire(m, w2, 1, "db", true, true))
	mustQueue(t, "reader behind the second writer", rwAcquire(m, r5, 1, "db", false, true))

	rwRelease(m, r1, 2, "db")
	if info := m.RWLock("db"); info.Writer.Token != 0 || len(info.Readers) != 1 {
		t.Fatalf("after one reader left: %+v, want the other reader alone, writer waiting", info)
	}
	rwRelease(m, r2, 2, "db")
	info := m.RWLock("db")
	if info.Writer.Session != w1 || info.Writer.Kind != fence.KindWrite || info.Writer.Token <= g2.Token || len(info.Readers) != 0 {
		t.Fatalf("after the readers left: %+v, want writer %d alone with a token above %d", info, w1, g2.Token)
	}
	wtok := info.Writer.Token
	want := []fsm.RWWaiter{{Session: r3}, {Session: r4}, {Session: w2, Write: true}, {Session: r5}}
	if !slices.Equal(info.Waiters, want) {
		t.Fatalf("Waiters=%v, want %v", info.Waiters, want)
	}
	rwRelease(m, w1, 2, "db")
	info = m.RWLock("db")
	if got := readerSessions(info); !slices.Equal(got, []uint64{r3, r4}) || info.Writer.Token != 0 {
		t.Fatalf("after the writer left: readers %v, writer %+v; want readers %d and %d together", got, info.Writer, r3, r4)
	}
	if a, b := info.Readers[0].Token, info.Readers[1].Token; a <= wtok || b <= a {
		t.Fatalf("readers admitted together have tokens %d and %d, want each its own, above the writer's %d", a, b, wtok)
	}
	if !slices.Equal(info.Waiters, []fsm.RWWaiter{{Session: w2, Write: true}, {Session: r5}}) {
		t.Fatalf("Waiters=%v, want the second writer, then the last reader", info.Waiters)
	}
}

// A waiting writer that gives up lets in the readers it held back.
func TestRWLock_WriterLeavingAdmitsReaders(t *testing.T) {
	for _, how := range []string{"cancel", "release", "expire"} {
		t.Run(how, func(t *testing.T) {
			m := newMachine(t)
			r1, w, r2 := createSession(t, m), createSession(t, m), createSession(t, m)
			mustGrant(t, "reader", rwAcquire(m, r1, 1, "db", false, false))
			mustQueue(t, "writer", rwAcquire(m, w, 1, "db", true, true))
			mustQueue(t, "reader behind it", rwAcquire(m, r2, 1, "db", false, true))
			switch how {
			case "cancel":
				m.Apply(&statev1.Command{Op: &statev1.Command_RwCancelWait{RwCancelWait: &statev1.RWCancelWait{Session: w, Name: "db"}}})
			case "release":
				if res := rwRelease(m, w, 2, "db"); res.Release != fsm.NotOwned {
					t.Fatalf("release by a waiter = %v, want not_owned (readers hold it)", res.Release)
				}
			case "expire":
				expire(m, w, 0)
			}
			if got := readerSessions(m.RWLock("db")); !slices.Equal(got, []uint64{r1, r2}) {
				t.Fatalf("readers %v, want %d and %d", got, r1, r2)
			}
		})
	}
}

// A session holds one grant of a name in one mode: asking again in the
// same mode returns it; asking in the other mode (an upgrade or a
// downgrade) is refused and changes nothing.
func TestRWLock_NoUpgrade(t *testing.T) {
	m := newMachine(t)
	r, w := createSession(t, m), createSession(t, m)
	g := mustGrant(t, "read", rwAcquire(m, r, 1, "db", false, false))
	if again := mustGrant(t, "read again", rwAcquire(m, r, 2, "db", false, false)); again.Token != g.Token {
		t.Fatalf("second read of one session has token %d, want its grant's %d", again.Token, g.Token)
	}
	mustGrant(t, "write elsewhere", rwAcquire(m, w, 1, "other", true, false))
	before := mustSnapshot(t, m)
	for _, tt := range []struct {
		what    string
		session uint64
		name    string
		write   bool
	}{{"upgrade", r, "db", true}, {"downgrade", w, "other", false}} {
		res := rwAcquire(m, tt.session, 9, tt.name, tt.write, true)
		if !errors.Is(res.Err, fence.ErrInvalidArgument) || !strings.Contains(res.Err.Error(), "no upgrade or downgrade") {
			t.Fatalf("%s = %+v, want refused: no upgrade or downgrade", tt.what, res)
		}
	}
	if !bytes.Equal(mustSnapshot(t, m), before) {
		t.Fatal("a refused upgrade changed the state")
	}
}

// A lock and a read/write lock of the same name are two objects: they do
// not exclude each other, and a seq of one session used for one is never
// answered with the other's result.
func TestRWLock_ApartFromLockOfSameName(t *testing.T) {
	m := newMachine(t)
	a, b := createSession(t, m), createSession(t, m)
	lg := mustGrant(t, "lock", acquire(m, a, 1, "x", false))
	wg := mustGrant(t, "write lock of the same name", rwAcquire(m, b, 1, "x", true, false))
	if lg.Kind != fence.KindLock || wg.Kind != fence.KindWrite {
		t.Fatalf("kinds %q and %q, want lock and write", lg.Kind, wg.Kind)
	}
	before := mustSnapshot(t, m)
	res := rwAcquire(m, a, 1, "x", false, false) // a's seq 1 was its lock acquire
	if !errors.Is(res.Err, fence.ErrInvalidArgument) || !strings.Contains(res.Err.Error(), "already used") || res.Granted {
		t.Fatalf("read with the seq of a lock acquire = %+v, want refused as already used", res)
	}
	if res := rwRelease(m, b, 1, "x"); !errors.Is(res.Err, fence.ErrInvalidArgument) {
		t.Fatalf("release with the seq of the acquire = %+v, want refused", res)
	}
	if !bytes.Equal(mustSnapshot(t, m), before) {
		t.Fatal("a refused request changed the state")
	}
	if res := release(m, a, 2, "x"); res.Release != fsm.Released {
		t.Fatalf("lock release = %v, want released", res.Release)
	}
	if info := m.RWLock("x"); info.Writer.Session != b {
		t.Fatalf("the lock's release touched the read/write lock: %+v", info)
	}
}

// Release outcomes: released, already_released, not_owned, and a retry of
// a release answers what the first one did.
func TestRWLock_ReleaseResults(t *testing.T) {
	m := newMachine(t)
	a, b := createSession(t, m), createSession(t, m)
	mustGrant(t, "write", rwAcquire(m, a, 1, "x", true, false))
	if res := rwRelease(m, b, 1, "x"); res.Release != fsm.NotOwned {
		t.Fatalf("release by another session = %v, want not_owned", res.Release)
	}
	if res := rwRelease(m, a, 2, "x"); res.Release != fsm.Released {
		t.Fatalf("release = %v, want released", res.Release)
	}
	if res := rwRelease(m, a, 2, "x"); res.Release != fsm.Released {
		t.Fatalf("retried release = %v, want the first answer, released", res.Release)
	}
	if res := rwRelease(m, a, 3, "x"); res.Release != fsm.AlreadyReleased {
		t.Fatalf("second release = %v, want already_released", res.Release)
	}
}

// A one-shot grant (session 0) has a session of its own TTL; a try that
// fails leaves no session behind.
func TestRWLock_OneShot(t *testing.T) {
	m := newMachine(t)
	res := m.Apply(&statev1.Command{Op: &statev1.Command_RwAcquire{RwAcquire: &statev1.RWAcquire{Name: "x", Mode: rwMode(true), TtlMs: 700, RequestId: "r1"}}})
	g := mustGrant(t, "one-shot write", res)
	if g.TTL.Milliseconds() != 700 || g.Session == 0 {
		t.Fatalf("one-shot grant %+v, want its own session of 700ms", g)
	}
	n := m.SessionCount()
	res = m.Apply(&statev1.Command{Op: &statev1.Command_RwAcquire{RwAcquire: &statev1.RWAcquire{Name: "x", Mode: rwMode(false), TtlMs: 700, RequestId: "r2"}}})
	if res.Granted || res.Err != nil || m.SessionCount() != n {
		t.Fatalf("failed one-shot try = %+v with %d sessions, want not granted and still %d", res, m.SessionCount(), n)
	}
}

// Malformed names and unknown modes are refused with a clear error and
// change nothing.
func TestRWLock_BadInputChangesNothing(t *testing.T) {
	m := newMachine(t)
	s := createSession(t, m)
	mustGrant(t, "read", rwAcquire(m, s, 1, "x", false, false))
	before := mustSnapshot(t, m)
	acq := func(a *statev1.RWAcquire) *statev1.Command {
		return &statev1.Command{Op: &statev1.Command_RwAcquire{RwAcquire: a}}
	}
	rel := func(r *statev1.RWRelease) *statev1.Command {
		return &statev1.Command{Op: &statev1.Command_RwRelease{RwRelease: r}}
	}
	for _, tt := range []struct {
		name string
		cmd  *statev1.Command
		want error
		msg  string
	}{
		{"empty name", acq(&statev1.RWAcquire{Session: s, Seq: 2, Mode: rwMode(false)}), fence.ErrInvalidArgument, "empty"},
		{"long name", acq(&statev1.RWAcquire{Session: s, Seq: 2, Name: strings.Repeat("n", 513), Mode: rwMode(false)}), fence.ErrInvalidArgument, "longer than 512"},
		{"control char", acq(&statev1.RWAcquire{Session: s, Seq: 2, Name: "a\x00b", Mode: rwMode(true)}), fence.ErrInvalidArgument, "control"},
		{"invalid utf8", acq(&statev1.RWAcquire{Session: s, Seq: 2, Name: "\xff", Mode: rwMode(true)}), fence.ErrInvalidArgument, "UTF-8"},
		{"no mode", acq(&statev1.RWAcquire{Session: s, Seq: 2, Name: "y"}), fence.ErrInvalidArgument, "neither read (1) nor write (2)"},
		{"unknown mode", acq(&statev1.RWAcquire{Session: s, Seq: 2, Name: "y", Mode: 7}), fence.ErrInvalidArgument, "mode 7"},
		{"unknown mode one-shot", acq(&statev1.RWAcquire{Name: "y", Mode: -1, TtlMs: 1000, RequestId: "q"}), fence.ErrInvalidArgument, "mode -1"},
		{"unknown session", acq(&statev1.RWAcquire{Session: 99, Seq: 1, Name: "y", Mode: rwMode(false)}), fence.ErrSessionNotFound, "does not exist"},
		{"one-shot ttl", acq(&statev1.RWAcquire{Name: "y", Mode: rwMode(false), TtlMs: 5}), fence.ErrInvalidArgument, "ttl"},
		{"seq reused for another name", acq(&statev1.RWAcquire{Session: s, Seq: 1, Name: "y", Mode: rwMode(false)}), fence.ErrInvalidArgument, "already used"},
		{"release empty name", rel(&statev1.RWRelease{Session: s, Seq: 2}), fence.ErrInvalidArgument, "empty"},
		{"release control char", rel(&statev1.RWRelease{Session: s, Seq: 2, Name: "x\n"}), fence.ErrInvalidArgument, "control"},
		{"release with the acquire's seq", rel(&statev1.RWRelease{Session: s, Seq: 1, Name: "x"}), fence.ErrInvalidArgument, "already used for an acquire"},
		{"withdraw its own seq", rel(&statev1.RWRelease{Session: s, Seq: 3, Name: "x", WithdrawSeq: 3}), fence.ErrInvalidArgument, "own seq"},
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

// A withdrawal undoes exactly its acquire, whichever is applied first.
func TestRWLock_Withdraw(t *testing.T) {
	m := newMachine(t)
	a, b, c := createSession(t, m), createSession(t, m), createSession(t, m)
	withdraw := func(s, seq, w uint64) fsm.Result {
		return m.Apply(&statev1.Command{Op: &statev1.Command_RwRelease{RwRelease: &statev1.RWRelease{Session: s, Seq: seq, Name: "x", WithdrawSeq: w}}})
	}
	// Before its acquire: the acquire is refused when it arrives.
	if res := withdraw(a, 1, 2); res.Err != nil || res.Release != fsm.AlreadyReleased {
		t.Fatalf("early withdraw = %+v", res)
	}
	if res := rwAcquire(m, a, 2, "x", true, true); !errors.Is(res.Err, fence.ErrInvalidArgument) {
		t.Fatalf("withdrawn acquire arriving = %+v, want refused", res)
	}
	// After a grant: released. After a queued wait: it leaves the queue,
	// and the reader behind the writer gets in.
	mustGrant(t, "read", rwAcquire(m, b, 1, "x", false, false))
	mustQueue(t, "write", rwAcquire(m, a, 3, "x", true, true))
	mustQueue(t, "read behind", rwAcquire(m, c, 1, "x", false, true))
	if res := withdraw(a, 4, 3); res.Err != nil || res.Release != fsm.NotOwned {
		t.Fatalf("withdraw of a queued write = %+v, want not_owned (readers hold it)", res)
	}
	if got := readerSessions(m.RWLock("x")); !slices.Equal(got, []uint64{b, c}) {
		t.Fatalf("readers after the writer withdrew: %v, want %d and %d", got, b, c)
	}
	if res := withdraw(b, 2, 1); res.Release != fsm.Released {
		t.Fatalf("withdraw of a granted read = %+v, want released", res)
	}
}

// The read/write locks are a snapshot section: holders, modes, waiters and
// tokens survive snapshot and restore, and the restored machine goes on as
// the original would.
func TestRWLock_SnapshotRestore(t *testing.T) {
	m := newMachine(t)
	r, w, r2 := createSession(t, m), createSession(t, m), createSession(t, m)
	mustGrant(t, "read", rwAcquire(m, r, 1, "x", false, false))
	mustQueue(t, "write", rwAcquire(m, w, 1, "x", true, true))
	mustQueue(t, "read", rwAcquire(m, r2, 1, "x", false, true))
	snap := mustSnapshot(t, m)
	restored := fsm.New(nil)
	if err := restored.Restore(snap); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if !bytes.Equal(mustSnapshot(t, restored), snap) {
		t.Fatal("restored state snapshots to other bytes")
	}
	for _, mm := range []*fsm.Machine{m, restored} {
		rwRelease(mm, r, 2, "x")
	}
	if a, b := m.RWLock("x"), restored.RWLock("x"); a.Writer != b.Writer || a.Writer.Session != w || !slices.Equal(a.Waiters, b.Waiters) {
		t.Fatalf("after restore: %+v, original %+v; want writer %d in both", b, a, w)
	}
	// A damaged snapshot (a writer with a reader) is refused.
	var st statev1.State
	if err := proto.Unmarshal(snap, &st); err != nil {
		t.Fatal(err)
	}
	st.Rwlocks[0].Holders = append(st.Rwlocks[0].Holders, &statev1.RWHolder{Session: w, Mode: statev1.RWMode_RW_MODE_WRITE, Token: st.LastToken})
	st.Rwlocks[0].Waiters = st.Rwlocks[0].Waiters[1:]
	if err := restore(t, &st); err == nil || !strings.Contains(err.Error(), "writer") {
		t.Fatalf("Restore of a writer beside a reader = %v, want refused", err)
	}
}

// Read/write grants and waiters count against the owner's quota with the
// lock's (one count over every primitive); a refused request changes
// nothing.
func TestRWLock_Quota(t *testing.T) {
	m := newMachine(t)
	s := ownedSession(m, testQuota).Session // 2 grants, 1 waiter
	other := createSession(t, m)
	q := func(name string, write, wait bool) fsm.Result {
		return m.Apply(&statev1.Command{Op: &statev1.Command_RwAcquire{RwAcquire: &statev1.RWAcquire{Session: s, Name: name, Mode: rwMode(write), Wait: wait, Quota: testQuota}}})
	}
	mustGrant(t, "lock", quotaAcquire(m, s, "a", false, testQuota))
	mustGrant(t, "read", q("b", false, false))
	mustGrant(t, "other's write", rwAcquire(m, other, 1, "d", true, false))
	mustGrant(t, "other's second write", rwAcquire(m, other, 2, "e", true, false))
	mustQueue(t, "wait", q("d", false, true))
	before := mustSnapshot(t, m)
	wantQuotaError(t, q("c", false, false), fsm.QuotaHeld)
	wantQuotaError(t, q("e", true, true), fsm.QuotaWaiting)
	if !bytes.Equal(mustSnapshot(t, m), before) {
		t.Fatal("a refused request changed the state")
	}
	if _, held, waiting := m.Usage(testQuota.Owner); held != 2 || waiting != 1 {
		t.Fatalf("Usage: %d held, %d waiting; want 2 and 1", held, waiting)
	}
}

// In the fenced kv a write grant's token may write the keys its scope
// covers; a read grant's may not: it is authority for reading only.
func TestRWLock_KVScopeReadGrantCannotWrite(t *testing.T) {
	m := newMachine(t)
	r, w := createSession(t, m), createSession(t, m)
	rg := mustGrant(t, "read", rwAcquire(m, r, 1, "cfg", false, false))
	put := func(tok fence.Token) fsm.Result {
		return kvWrite(m, &statev1.KVWrite{Key: "cfg/a", Value: []byte("v"), Token: uint64(tok), Scoped: true})
	}
	res := put(rg.Token)
	if !errors.Is(res.Err, fence.ErrScopeMismatch) || !strings.Contains(res.Err.Error(), "reading only") {
		t.Fatalf("kv write with a read grant's token = %v, want a scope mismatch: reading only", res.Err)
	}
	rwRelease(m, r, 2, "cfg")
	wg := mustGrant(t, "write", rwAcquire(m, w, 1, "cfg", true, false))
	if res := put(wg.Token); res.Err != nil {
		t.Fatalf("kv write with the write grant's token: %v", res.Err)
	}
}
