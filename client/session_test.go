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
// renewals fail, it enters jeopardy, then loses the session, and its
// Done closes before the server expires the session.
func TestSession_JeopardyThenLost(t *testing.T) {
	srv := testserver.Start(t)
	api := lockAPI(srv.Addr())
	p, err := faultproxy.New(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

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
	lostAt := time.Now()
	// The server can expire the session no earlier than TTL after it
	// received the last renewal, which was sent no earlier than the last
	// confirmed one: ValidUntil + margin.
	serverBound := s.ValidUntil().Add(s.Margin())
	if !lostAt.Before(serverBound) {
		t.Errorf("Done closed at %v, not before the server-side expiry bound %v", lostAt, serverBound)
	}
	// And the server really did still hold it: it expires it only later.
	var expiredAt time.Time
	eventually(t, "server-side expiry", func() bool {
		if serverHasSession(t, api, s.ID()) {
			return false
		}
		expiredAt = time.Now()
		return true
	})
	if !lostAt.Before(expiredAt) {
		t.Errorf("Done closed at %v, after the server expired the session at %v", lostAt, expiredAt)
	}

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
	c := newClient(t, []string{srv.Addr()}, client.WithClock(clk))
	s := newSession(t, c, client.WithTTL(5*time.Second))
	waiter := client.NewMutex(s, name)
	done := make(chan error, 1)
	go func() { done <- waiter.Lock(testCtx(t)) }()
	eventually(t, "waiter queued", func() bool { return len(waiters(t, api, name)) == 1 })

	// The waiter's clock jumps past its validity, then the grant comes.
	clk.offset.Store(int64(time.Minute))
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
	within(t, "Done", s.Done())
	// The late grant was given back: another session gets the lock.
	next := client.NewMutex(newSession(t, other), name)
	eventually(t, "lock free again", func() bool { return next.TryLock(testCtx(t)) == nil })
}
