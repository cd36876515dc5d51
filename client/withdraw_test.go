package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/faultproxy"
	"github.com/fenced-dev/fenced/internal/testserver"
	"github.com/fenced-dev/fenced/server"
)

// abandonTries is how often each way of giving up on an acquire is tried.
const abandonTries = 200

// grantHook is a server event log that counts the grants the server
// applies to each lock, and calls a function, once, when it applies the
// event it was told to watch for, inside the state machine's apply: before
// the reply of a grant made in the same step is sent.
type grantHook struct {
	mu     sync.Mutex
	grants map[string][]uint64 // lock name -> the sessions granted it
	watch  hookEvent
	fn     func()
}

// hookEvent is an event of the server's event log; session 0 in a watched
// event matches any session.
type hookEvent struct {
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	Session uint64 `json:"session"`
}

func (h *grantHook) Write(p []byte) (int, error) {
	var e hookEvent
	if err := json.Unmarshal(p, &e); err != nil {
		return len(p), nil
	}
	h.mu.Lock()
	if e.Kind == "server_grant" {
		if h.grants == nil {
			h.grants = map[string][]uint64{}
		}
		h.grants[e.Name] = append(h.grants[e.Name], e.Session)
	}
	var fn func()
	if w := h.watch; h.fn != nil && w.Kind == e.Kind && w.Name == e.Name && (w.Session == 0 || w.Session == e.Session) {
		fn, h.fn = h.fn, nil
	}
	h.mu.Unlock()
	if fn != nil {
		fn()
	}
	return len(p), nil
}

// on calls fn when the server applies an event of kind ("server_grant",
// "server_release") for name and session (0: any).
func (h *grantHook) on(kind string, session uint64, name string, fn func()) {
	h.mu.Lock()
	h.watch, h.fn = hookEvent{kind, name, session}, fn
	h.mu.Unlock()
}

// granted returns how many grants of name the server applied, to session
// or, if session is 0, to any session.
func (h *grantHook) granted(session uint64, name string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, s := range h.grants[name] {
		if session == 0 || s == session {
			n++
		}
	}
	return n
}

// abandonFixture is a server with a grant hook and three sessions: s1
// gives up on acquires, s2 holds locks for s1 to queue behind, s3 checks
// that each lock is free at once afterwards.
type abandonFixture struct {
	hook       *grantHook
	c          *client.Client
	api        func(name string) []uint64 // the sessions queued for name
	s1, s2, s3 *client.Session
}

func newAbandonFixture(t *testing.T) *abandonFixture {
	hook := &grantHook{}
	srv := testserver.Start(t, func(c *server.Config) { c.Test.EventLog = hook })
	c := newClient(t, []string{srv.Addr()})
	api := lockAPI(srv.Addr())
	return &abandonFixture{
		hook: hook,
		c:    c,
		api:  func(name string) []uint64 { return waiters(t, api, name) },
		s1:   newSession(t, c), s2: newSession(t, c), s3: newSession(t, c),
	}
}

// checkNothingLeft checks what a failed acquire of m must leave: an error
// wrapping context.Canceled, no grant in m, and a lock that another
// session takes at once.
func (f *abandonFixture) checkNothingLeft(t *testing.T, try int, m *client.Mutex, err error) {
	t.Helper()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("try %d: acquire = %v, want an error wrapping context.Canceled", try, err)
	}
	if tok := m.Token(); tok != 0 {
		t.Fatalf("try %d: Token() after the failed acquire = %v, want 0", try, tok)
	}
	if m.Context().Err() == nil {
		t.Fatalf("try %d: Context() after the failed acquire is not cancelled", try)
	}
	f.checkFree(t, try, m.Name())
}

// checkFree checks that another session takes the lock name at once.
func (f *abandonFixture) checkFree(t *testing.T, try int, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	other := client.NewMutex(f.s3, name)
	if err := other.TryLock(ctx); err != nil {
		t.Fatalf("try %d: another session's TryLock right after the failed acquire: %v", try, err)
	}
	if err := other.Unlock(ctx); err != nil {
		t.Fatalf("try %d: Unlock: %v", try, err)
	}
}

// acquireFuncs are the two ways to acquire, taken in turn.
var acquireFuncs = []struct {
	name string
	do   func(*client.Mutex, context.Context) error
}{
	{"TryLock", (*client.Mutex).TryLock},
	{"Lock", (*client.Mutex).Lock},
}

// Lock and TryLock with a context that ended before the call send nothing:
// the server grants nothing, so the next grant's token is the next one.
func TestMutex_AbandonedBeforeSending(t *testing.T) {
	f := newAbandonFixture(t)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range abandonTries {
		a := acquireFuncs[i%2]
		m := client.NewMutex(f.s1, fmt.Sprintf("before-%d", i))
		f.checkNothingLeft(t, i, m, a.do(m, done))
		if n := f.hook.granted(f.s1.ID(), m.Name()); n != 0 {
			t.Fatalf("try %d: %s with an ended context: the server granted the lock %d times, want never", i, a.name, n)
		}
	}
}

// sweepCtx returns a context cancelled after the i-th of 50 delays spread
// over 1.5ms, about a round trip to the test server under -race, and a
// function that stops it.
func sweepCtx(ctx context.Context, i int) (context.Context, func()) {
	cctx, cancel := context.WithCancel(ctx)
	timer := time.AfterFunc(time.Duration(i%50)*30*time.Microsecond, cancel)
	return cctx, func() { timer.Stop(); cancel() }
}

// Lock and TryLock cancelled at moments spread over a round trip: before
// sending, in flight, and after the grant.
func TestMutex_AbandonedInFlight(t *testing.T) {
	f := newAbandonFixture(t)
	ctx := testCtx(t)
	reached := 0 // failed tries the server granted, then took back
	for i := range abandonTries {
		a := acquireFuncs[i%2]
		m := client.NewMutex(f.s1, fmt.Sprintf("inflight-%d", i))
		cctx, stop := sweepCtx(ctx, i)
		err := a.do(m, cctx)
		stop()
		if err == nil {
			// The reply won the race: the lock is m's.
			if err := m.Unlock(ctx); err != nil {
				t.Fatalf("try %d: Unlock: %v", i, err)
			}
			continue
		}
		f.checkNothingLeft(t, i, m, err)
		if f.hook.granted(f.s1.ID(), m.Name()) > 0 {
			reached++
		}
	}
	t.Logf("%d of %d tries were granted on the server and withdrawn", reached, abandonTries)
}

// Lock cancelled while it waits in the queue: the holder's release then
// grants no one.
func TestMutex_AbandonedWhileQueued(t *testing.T) {
	f := newAbandonFixture(t)
	ctx := testCtx(t)
	for i := range abandonTries {
		name := fmt.Sprintf("queued-%d", i)
		holder := client.NewMutex(f.s2, name)
		if err := holder.TryLock(ctx); err != nil {
			t.Fatalf("try %d: holder's TryLock: %v", i, err)
		}
		m := client.NewMutex(f.s1, name)
		cctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() { errc <- m.Lock(cctx) }()
		eventually(t, "queued", func() bool { return len(f.api(name)) == 1 })
		cancel()
		err := <-errc
		if err := holder.Unlock(ctx); err != nil {
			t.Fatalf("try %d: holder's Unlock: %v", i, err)
		}
		f.checkNothingLeft(t, i, m, err)
		if n := f.hook.granted(f.s1.ID(), name); n != 0 {
			t.Fatalf("try %d: the abandoned waiter was granted the lock %d times, want never", i, n)
		}
	}
}

// Lock and TryLock cancelled after the server applied the grant and before
// the reply came back.
func TestMutex_AbandonedAfterGrant(t *testing.T) {
	f := newAbandonFixture(t)
	ctx := testCtx(t)
	for i := range abandonTries {
		a := acquireFuncs[i%2]
		name := fmt.Sprintf("granted-%d", i)
		m := client.NewMutex(f.s1, name)
		cctx, cancel := context.WithCancel(ctx)
		var err error
		if a.name == "TryLock" {
			f.hook.on("server_grant", f.s1.ID(), name, cancel)
			err = m.TryLock(cctx)
		} else {
			// Granted from the queue when the holder releases: the
			// cancellation comes in the step of the state machine that
			// releases the lock and grants it to m's session, before the
			// waiting call is told of the grant.
			holder := client.NewMutex(f.s2, name)
			if err := holder.TryLock(ctx); err != nil {
				t.Fatalf("try %d: holder's TryLock: %v", i, err)
			}
			f.hook.on("server_release", f.s2.ID(), name, cancel)
			errc := make(chan error, 1)
			go func() { errc <- m.Lock(cctx) }()
			eventually(t, "queued", func() bool { return len(f.api(name)) == 1 })
			if err := holder.Unlock(ctx); err != nil {
				t.Fatalf("try %d: holder's Unlock: %v", i, err)
			}
			err = <-errc
		}
		cancel()
		if n := f.hook.granted(f.s1.ID(), name); n != 1 {
			t.Fatalf("try %d: %s: the server granted the lock %d times, want once", i, a.name, n)
		}
		f.checkNothingLeft(t, i, m, err)
	}
}

// Client.Acquire (a TTL lock) given up on before sending, in flight and
// after the grant leaves nothing behind either: the lock is free at once,
// not when the TTL runs out.
func TestClient_AcquireAbandoned(t *testing.T) {
	f := newAbandonFixture(t)
	ctx := testCtx(t)
	const ttl = time.Minute
	check := func(t *testing.T, try int, name string, l *client.TTLLock, err error) {
		t.Helper()
		if !errors.Is(err, context.Canceled) || l != nil {
			t.Fatalf("try %d: Acquire = %v, %v; want nil and an error wrapping context.Canceled", try, l, err)
		}
		f.checkFree(t, try, name)
	}
	t.Run("before sending", func(t *testing.T) {
		done, cancel := context.WithCancel(ctx)
		cancel()
		for i := range abandonTries {
			name := fmt.Sprintf("ttl-before-%d", i)
			l, err := f.c.Acquire(done, name, ttl)
			check(t, i, name, l, err)
			if n := f.hook.granted(0, name); n != 1 { // the check's own grant
				t.Fatalf("try %d: the server granted %q %d times, want once (to the check)", i, name, n)
			}
		}
	})
	t.Run("in flight", func(t *testing.T) {
		reached := 0
		for i := range abandonTries {
			name := fmt.Sprintf("ttl-inflight-%d", i)
			cctx, stop := sweepCtx(ctx, i)
			l, err := f.c.Acquire(cctx, name, ttl)
			stop()
			if err == nil {
				if err := l.Release(ctx); err != nil {
					t.Fatalf("try %d: Release: %v", i, err)
				}
				continue
			}
			if f.hook.granted(0, name) > 0 {
				reached++
			}
			check(t, i, name, l, err)
		}
		t.Logf("%d of %d tries were granted on the server and withdrawn", reached, abandonTries)
	})
	t.Run("after the grant", func(t *testing.T) {
		for i := range abandonTries {
			name := fmt.Sprintf("ttl-granted-%d", i)
			cctx, cancel := context.WithCancel(ctx)
			f.hook.on("server_grant", 0, name, cancel)
			l, err := f.c.Acquire(cctx, name, ttl)
			cancel()
			if n := f.hook.granted(0, name); n != 1 {
				t.Fatalf("try %d: the server granted %q %d times, want once", i, name, n)
			}
			check(t, i, name, l, err)
		}
	})
}

// A TryLock (or Client.Acquire) answered "not granted" after a retry
// withdraws the acquire: the first attempt, delayed on a slow link, would
// otherwise be applied as a new try once the lock is free, and leave it
// held for a caller that was told it did not get it.
func TestTryLock_NotGrantedAfterRetryLeavesNothing(t *testing.T) {
	hook := &grantHook{}
	srv := testserver.Start(t, func(c *server.Config) { c.Test.EventLog = hook })
	direct := newClient(t, []string{srv.Addr()})
	holder, other := newSession(t, direct), newSession(t, direct)
	ctx := testCtx(t)
	const delay = time.Second

	for _, tc := range []struct {
		name    string
		acquire func(c *client.Client, s *client.Session, name string) error
	}{
		{"TryLock", func(_ *client.Client, s *client.Session, name string) error {
			return client.NewMutex(s, name).TryLock(ctx)
		}},
		{"Acquire", func(c *client.Client, _ *client.Session, name string) error {
			_, err := c.Acquire(ctx, name, time.Minute)
			return err
		}},
	} {
		slow, err := faultproxy.New(srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer slow.Close()
		// Calls go through the slow link first, and after a timeout
		// straight to the server. The link is fast until the session and
		// the pipeline's connection are open.
		c := newClient(t, []string{slow.Addr(), srv.Addr()}, client.WithRequestTimeout(delay/4))
		s := newSession(t, c, client.WithTTL(time.Minute))
		if err := client.NewMutex(s, "warm-up").Unlock(ctx); err != nil {
			t.Fatalf("%s: warm-up: %v", tc.name, err)
		}
		name := "retried-" + tc.name
		h := client.NewMutex(holder, name)
		if err := h.TryLock(ctx); err != nil {
			t.Fatalf("%s: holder's TryLock: %v", tc.name, err)
		}
		slow.SetDelay(delay)
		if err := tc.acquire(c, s, name); !errors.Is(err, fence.ErrNotGranted) {
			t.Fatalf("%s while held = %v, want fence.ErrNotGranted", tc.name, err)
		}
		if err := h.Unlock(ctx); err != nil {
			t.Fatalf("%s: holder's Unlock: %v", tc.name, err)
		}
		// Let the first attempt through the slow link arrive.
		time.Sleep(3 * delay)
		if n := hook.granted(0, name); n != 1 {
			t.Errorf("%s: the server granted %q %d times, want once (to the holder)", tc.name, name, n)
		}
		m := client.NewMutex(other, name)
		if err := m.TryLock(ctx); err != nil {
			t.Fatalf("%s: another session's TryLock after the late attempt arrived: %v", tc.name, err)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatalf("%s: Unlock: %v", tc.name, err)
		}
	}
}
