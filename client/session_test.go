package client_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/faultproxy"
	"github.com/fenced-dev/fenced/internal/testserver"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// recordStates records every state s goes through, as Watch reports it,
// until it is lost.
func recordStates(s *client.Session) (states func() []client.State) {
	var mu sync.Mutex
	var seen []client.State
	go func() {
		for {
			st, changed := s.Watch()
			mu.Lock()
			if len(seen) == 0 || seen[len(seen)-1] != st {
				seen = append(seen, st)
			}
			mu.Unlock()
			if st == client.StateLost {
				return
			}
			<-changed
		}
	}()
	return func() []client.State {
		mu.Lock()
		defer mu.Unlock()
		return append([]client.State(nil), seen...)
	}
}

func TestSession_Basics(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, []string{srv.Addr()})
	before := time.Now()
	s := newSession(t, c, client.WithTTL(2*time.Second), client.WithMargin(300*time.Millisecond))
	if s.ID() == 0 {
		t.Errorf("ID() = 0")
	}
	if got := s.TTL(); got != 2*time.Second {
		t.Errorf("TTL() = %v, want 2s", got)
	}
	if got := s.Margin(); got != 300*time.Millisecond {
		t.Errorf("Margin() = %v, want 300ms", got)
	}
	// Validity is measured from before the request was sent.
	if vu := s.ValidUntil(); vu.Before(before.Add(1700*time.Millisecond)) || vu.After(time.Now().Add(1700*time.Millisecond)) {
		t.Errorf("ValidUntil() = %v, want within [%v, now+1.7s]", vu, before.Add(1700*time.Millisecond))
	}
	if st := s.State(); st != client.StateValid {
		t.Errorf("State() = %v, want %v", st, client.StateValid)
	}
	if err := s.Err(); err != nil {
		t.Errorf("Err() = %v, want nil", err)
	}
	select {
	case <-s.Jeopardy():
		t.Errorf("Jeopardy() closed for a new session")
	case <-s.Done():
		t.Errorf("Done() closed for a new session")
	default:
	}
	// Renewals move the validity later, several times over the TTL.
	for i := range 3 {
		vu := s.ValidUntil()
		eventually(t, "renewal", func() bool { return s.ValidUntil().After(vu) })
		if err := s.Err(); err != nil {
			t.Fatalf("session lost after %d renewals: %v", i, err)
		}
	}
	if err := s.Close(testCtx(t)); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// TestSession_JeopardyThenLost cuts a holder off from the server: its
// renewals fail, it enters jeopardy, then loses the session, which the
// server expires in the end.
func TestSession_JeopardyThenLost(t *testing.T) {
	api, p := proxiedServer(t)

	const ttl = 3 * time.Second
	c := newClient(t, []string{p.Addr()}, client.WithRequestTimeout(time.Second))
	s := newSession(t, c, client.WithTTL(ttl))
	states := recordStates(s)
	m := client.NewMutex(s, "jeopardy")
	if err := m.Lock(testCtx(t)); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	gctx := m.Context()
	// Start from a confirmed renewal.
	vu := s.ValidUntil()
	eventually(t, "renewal", func() bool { return s.ValidUntil().After(vu) })

	p.SetMode(faultproxy.Blackhole)
	// Healing the link resets the silent connections, so that the server
	// does not wait for their streams when it shuts down.
	defer p.SetMode(faultproxy.Pass)
	within(t, "jeopardy", s.Jeopardy())
	within(t, "Done", s.Done())
	// That the server still held the session then is
	// TestSession_GivesUpBeforeServer's; here it expires it in the end.
	eventually(t, "server-side expiry", func() bool { return !serverHasSession(t, api, s.ID()) })

	want := []client.State{client.StateValid, client.StateJeopardy, client.StateLost}
	if got := states(); !equalStates(got, want) {
		t.Errorf("states = %v, want %v", got, want)
	}
	if err := s.Err(); !errors.Is(err, fence.ErrLockLost) || !errors.Is(err, client.ErrExpired) {
		t.Errorf("Err() = %v, want fence.ErrLockLost and client.ErrExpired", err)
	}
	within(t, "grant context cancelled", gctx.Done())
	if err := context.Cause(gctx); !errors.Is(err, fence.ErrLockLost) {
		t.Errorf("grant Context() cause = %v, want fence.ErrLockLost", err)
	}
	if err := m.Lock(testCtx(t)); !errors.Is(err, fence.ErrLockLost) {
		t.Errorf("Lock on a lost session = %v, want fence.ErrLockLost", err)
	}
}

// TestSession_GivesUpBeforeServer cuts the link right after a confirmed
// renewal, so that the session's validity comes from the renewal path, and
// checks the margin from the server's side: at the instant the SDK reports
// the session lost the server still holds the session and its lock, and
// goes on holding them for about the margin more. The server keeps a
// session for at least TTL after it received the last renewal, which is
// after the client sent it; the client trusts it until sent + TTL - margin.
// A client that measured its validity as sent + TTL (or later) would report
// the loss only when the server had already expired the session, or within
// a few milliseconds of it.
func TestSession_GivesUpBeforeServer(t *testing.T) {
	api, p := proxiedServer(t)

	// A margin large enough that a loaded machine's scheduling delays stay
	// well inside it.
	const ttl, margin = 3 * time.Second, 1200 * time.Millisecond
	const name = "margin"
	c := newClient(t, []string{p.Addr()}, client.WithRequestTimeout(time.Second))
	s := newSession(t, c, client.WithTTL(ttl), client.WithMargin(margin))
	m := client.NewMutex(s, name)
	if err := m.Lock(testCtx(t)); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	vu := s.ValidUntil()
	eventually(t, "renewal", func() bool { return s.ValidUntil().After(vu) })
	p.SetMode(faultproxy.Blackhole)
	defer p.SetMode(faultproxy.Pass)

	within(t, "Done", s.Done())
	lostAt := time.Now()
	if !serverHasSession(t, api, s.ID()) {
		t.Fatalf("when the SDK reported session %d lost, the server no longer had it", s.ID())
	}
	if holder := lockHolder(t, api, name); holder.GetSession() != s.ID() || holder.GetToken() != uint64(m.Token()) {
		t.Fatalf("when the SDK reported session %d lost, the server no longer held it: holder of %q = %v, want session %d with token %v",
			s.ID(), name, holder, s.ID(), m.Token())
	}
	time.Sleep(time.Until(lostAt.Add(margin / 2)))
	if holder := lockHolder(t, api, name); holder.GetSession() != s.ID() {
		t.Fatalf("the server gave up session %d within %v of the SDK reporting it lost (margin %v): holder of %q = %v",
			s.ID(), time.Since(lostAt), margin, name, holder)
	}
	if err := s.Err(); !errors.Is(err, client.ErrExpired) {
		t.Errorf("Err() = %v, want client.ErrExpired", err)
	}
}

// proxiedServer starts a server and a fault proxy in front of it, closed
// when the test ends. It returns a raw API client of the server itself, to
// look at its state past the proxy, and the proxy.
func proxiedServer(t *testing.T) (fencedv1connect.LockServiceClient, *faultproxy.Proxy) {
	t.Helper()
	srv := testserver.Start(t)
	p, err := faultproxy.New(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return lockAPI(srv.Addr()), p
}

// lockHolder returns the server's current grant of name, nil if none.
func lockHolder(t *testing.T, api fencedv1connect.LockServiceClient, name string) *fencedv1.Grant {
	t.Helper()
	resp, err := api.Describe(testCtx(t), connect.NewRequest(&fencedv1.DescribeRequest{Name: name}))
	if err != nil {
		t.Fatalf("Describe(%q): %v", name, err)
	}
	return resp.Msg.GetLock().GetHolder()
}

func equalStates(a, b []client.State) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSession_JeopardyRecovers heals the link while the session is in
// jeopardy: a renewal gets through and the session is valid again.
func TestSession_JeopardyRecovers(t *testing.T) {
	srv := testserver.Start(t)
	p, err := faultproxy.New(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	c := newClient(t, []string{p.Addr()}, client.WithRequestTimeout(time.Second))
	s := newSession(t, c, client.WithTTL(6*time.Second))
	m := client.NewMutex(s, "recover")
	if err := m.Lock(testCtx(t)); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	gctx := m.Context()

	p.SetMode(faultproxy.Blackhole)
	within(t, "jeopardy", s.Jeopardy())
	p.SetMode(faultproxy.Pass)

	st, changed := s.Watch()
	for st == client.StateJeopardy {
		within(t, "state change", changed)
		st, changed = s.Watch()
	}
	if st != client.StateValid {
		t.Fatalf("state after the link healed = %v (%v), want %v", st, s.Err(), client.StateValid)
	}
	select {
	case <-s.Jeopardy():
		t.Errorf("Jeopardy() closed after recovery")
	default:
	}
	if err := gctx.Err(); err != nil {
		t.Errorf("grant Context() after recovery: %v", err)
	}
	if err := m.Unlock(testCtx(t)); err != nil {
		t.Errorf("Unlock after recovery: %v", err)
	}
}

// TestSession_Gone checks that a session the server no longer has is lost
// at its next renewal.
func TestSession_Gone(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, []string{srv.Addr()})
	s := newSession(t, c, client.WithTTL(time.Second))
	m := client.NewMutex(s, "gone")
	if err := m.Lock(testCtx(t)); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	// Someone else closes the session on the server.
	if _, err := sessionAPI(srv.Addr()).CloseSession(testCtx(t), connect.NewRequest(&fencedv1.CloseSessionRequest{Session: s.ID(), Secret: s.Secret()})); err != nil {
		t.Fatalf("CloseSession: %v", err)
	}
	within(t, "Done", s.Done())
	if err := s.Err(); !errors.Is(err, fence.ErrSessionNotFound) || !errors.Is(err, fence.ErrLockLost) {
		t.Errorf("Err() = %v, want fence.ErrSessionNotFound and fence.ErrLockLost", err)
	}
	within(t, "grant context cancelled", m.Context().Done())
}

// offsetClock is the system clock moved ahead by a settable offset.
type offsetClock struct{ offset atomic.Int64 }

func (c *offsetClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// TestMutex_LateGrant checks that a grant arriving after the session's
// validity ran out is not returned as acquired.
func TestMutex_LateGrant(t *testing.T) {
	srv := testserver.Start(t)
	api := lockAPI(srv.Addr())
	const name = "late"
	other := newClient(t, []string{srv.Addr()})
	holder := client.NewMutex(newSession(t, other), name)
	if err := holder.Lock(testCtx(t)); err != nil {
		t.Fatalf("Lock: %v", err)
	}

	clk := new(offsetClock)
	var h hookLog // the LateGrant hook reports it (hooks_test.go)
	c := newClient(t, []string{srv.Addr()}, client.WithClock(clk), client.WithHooks(h.hooks()))
	s := newSession(t, c, client.WithTTL(5*time.Second))
	waiter := client.NewMutex(s, name)
	done := make(chan error, 1)
	go func() { done <- waiter.Lock(testCtx(t)) }()
	eventually(t, "waiter queued", func() bool { return len(waiters(t, api, name)) == 1 })

	// The waiter's clock jumps past its validity, then the grant comes.
	clk.offset.Store(int64(time.Minute))
	heldToken := holder.Token()
	if err := holder.Unlock(testCtx(t)); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, fence.ErrLockLost) {
			t.Errorf("Lock with a grant after the validity = %v, want fence.ErrLockLost", err)
		}
	case <-time.After(bound):
		t.Fatalf("Lock did not return within %v", bound)
	}
	if tok := waiter.Token(); tok != 0 {
		t.Errorf("Token() after a late grant = %v, want 0", tok)
	}
	h.mu.Lock()
	if late := h.late; len(late) != 1 || late[0] <= heldToken {
		t.Errorf("LateGrant hook saw tokens %v, want one above the first holder's %v", late, heldToken)
	}
	h.mu.Unlock()
	within(t, "Done", s.Done())
	// The late grant was given back: another session gets the lock.
	next := client.NewMutex(newSession(t, other), name)
	eventually(t, "lock free again", func() bool { return next.TryLock(testCtx(t)) == nil })
}
