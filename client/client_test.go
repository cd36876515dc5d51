package client_test

import (
	"context"
	"errors"
	"flag"
	"net"
	"net/http"
	"runtime"
	"strings"
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

// bound is how long a test waits for something that should happen at once
// or within a TTL: generous, so that a slow machine does not fail a test.
const bound = 10 * time.Second

// testCtx returns a context that ends with the test or after a minute.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// protocolFlag runs the package's tests with the SDK's streams on one
// protocol: go test ./client -args -protocol=connect (or native, or auto,
// the default: native against the test servers).
var protocolFlag = flag.String("protocol", "auto", "the Pipeline and KeepAlive protocol of every test Client: auto, native or connect")

// testProtocol is the protocol protocolFlag names.
func testProtocol(t *testing.T) client.Protocol {
	p, err := client.ParseProtocol(*protocolFlag)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// newClient returns a Client for endpoints, closed when the test ends. Its
// streams use the -protocol flag's protocol unless opts choose one.
func newClient(t *testing.T, endpoints []string, opts ...client.Option) *client.Client {
	t.Helper()
	opts = append([]client.Option{client.WithProtocol(testProtocol(t))}, opts...)
	c, err := client.New(endpoints, opts...)
	if err != nil {
		t.Fatalf("New(%v): %v", endpoints, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// newSession returns a session of c.
func newSession(t *testing.T, c *client.Client, opts ...client.SessionOption) *client.Session {
	t.Helper()
	s, err := c.NewSession(testCtx(t), opts...)
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	return s
}

// lockAPI returns a raw API client of addr, to look at the server's state
// from outside the SDK.
func lockAPI(addr string) fencedv1connect.LockServiceClient {
	tr := &http.Transport{}
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetUnencryptedHTTP2(true)
	return fencedv1connect.NewLockServiceClient(&http.Client{Transport: tr}, "http://"+addr)
}

func sessionAPI(addr string) fencedv1connect.SessionServiceClient {
	tr := &http.Transport{}
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetUnencryptedHTTP2(true)
	return fencedv1connect.NewSessionServiceClient(&http.Client{Transport: tr}, "http://"+addr)
}

// serverHasSession reports whether the server still has session id.
func serverHasSession(t *testing.T, api fencedv1connect.LockServiceClient, id uint64) bool {
	t.Helper()
	resp, err := api.Status(testCtx(t), connect.NewRequest(&fencedv1.StatusRequest{}))
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	for _, s := range resp.Msg.GetSessions() {
		if s.GetSession() == id {
			return true
		}
	}
	return false
}

// waiters returns the sessions queued for name.
func waiters(t *testing.T, api fencedv1connect.LockServiceClient, name string) []uint64 {
	t.Helper()
	resp, err := api.Describe(testCtx(t), connect.NewRequest(&fencedv1.DescribeRequest{Name: name}))
	if err != nil {
		t.Fatalf("Describe(%q): %v", name, err)
	}
	var out []uint64
	for _, w := range resp.Msg.GetLock().GetWaiters() {
		out = append(out, w.GetSession())
	}
	return out
}

// eventually polls cond every 5ms until it holds, failing the test after
// bound.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, bound)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// within waits for ch to close, failing the test after bound.
func within(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(bound):
		t.Fatalf("%s: not within %v", what, bound)
	}
}

func TestNew_InvalidEndpoints(t *testing.T) {
	for _, eps := range [][]string{nil, {}, {""}, {"ftp://host:1"}, {"http://"}} {
		if _, err := client.New(eps); !errors.Is(err, fence.ErrInvalidArgument) {
			t.Errorf("New(%q) = %v, want fence.ErrInvalidArgument", eps, err)
		}
	}
	if _, err := client.New([]string{"127.0.0.1:1"}, client.WithRequestTimeout(0)); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Errorf("New(WithRequestTimeout(0)) = %v, want fence.ErrInvalidArgument", err)
	}
}

// countingListener accepts connections and counts them, answering
// nothing.
func countingListener(t *testing.T) (addr string, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	return ln.Addr().String(), accepted
}

// TestValidation checks that invalid arguments fail with
// fence.ErrInvalidArgument before any request is sent.
func TestValidation(t *testing.T) {
	addr, accepted := countingListener(t)
	c := newClient(t, []string{addr})
	ctx := testCtx(t)

	sessionCases := []struct {
		name string
		opts []client.SessionOption
	}{
		{"ttl below minimum", []client.SessionOption{client.WithTTL(fence.MinTTL - time.Millisecond)}},
		{"ttl above maximum", []client.SessionOption{client.WithTTL(fence.MaxTTL + time.Second)}},
		{"negative margin", []client.SessionOption{client.WithMargin(-time.Millisecond)}},
		{"margin of half the ttl", []client.SessionOption{client.WithTTL(time.Second), client.WithMargin(500 * time.Millisecond)}},
	}
	for _, tc := range sessionCases {
		t.Run("NewSession/"+tc.name, func(t *testing.T) {
			if _, err := c.NewSession(ctx, tc.opts...); !errors.Is(err, fence.ErrInvalidArgument) {
				t.Errorf("NewSession() = %v, want fence.ErrInvalidArgument", err)
			}
		})
	}

	acquireCases := []struct {
		name, lock string
		ttl        time.Duration
	}{
		{"empty name", "", time.Second},
		{"long name", strings.Repeat("x", fence.MaxNameLen+1), time.Second},
		{"control character", "a\x00b", time.Second},
		{"invalid UTF-8", "a\xffb", time.Second},
		{"ttl below minimum", "lock", 10 * time.Millisecond},
		{"ttl above maximum", "lock", 25 * time.Hour},
	}
	for _, tc := range acquireCases {
		t.Run("Acquire/"+tc.name, func(t *testing.T) {
			if l, err := c.Acquire(ctx, tc.lock, tc.ttl); !errors.Is(err, fence.ErrInvalidArgument) {
				t.Errorf("Acquire(%q, %v) = %v, %v, want fence.ErrInvalidArgument", tc.lock, tc.ttl, l, err)
			}
		})
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("connections made for invalid calls: %d, want 0", n)
	}
}

func TestMutex_InvalidName(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, []string{srv.Addr()})
	s := newSession(t, c)
	for _, name := range []string{"", "a\nb", strings.Repeat("x", fence.MaxNameLen+1)} {
		m := client.NewMutex(s, name)
		if err := m.TryLock(testCtx(t)); !errors.Is(err, fence.ErrInvalidArgument) {
			t.Errorf("TryLock(%q) = %v, want fence.ErrInvalidArgument", name, err)
		}
		if err := m.Lock(testCtx(t)); !errors.Is(err, fence.ErrInvalidArgument) {
			t.Errorf("Lock(%q) = %v, want fence.ErrInvalidArgument", name, err)
		}
	}
}

// TestClient_Failover checks that calls move on from an endpoint that
// refuses connections to one that works.
func TestClient_Failover(t *testing.T) {
	srv := testserver.Start(t)
	down, err := faultproxy.New(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	down.SetMode(faultproxy.Reject)

	c := newClient(t, []string{down.Addr(), srv.Addr()})
	s := newSession(t, c, client.WithTTL(time.Second))
	m := client.NewMutex(s, "failover")
	if err := m.TryLock(testCtx(t)); err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	// Renewals keep the session alive through the working endpoint.
	first := s.ValidUntil()
	eventually(t, "a renewal", func() bool { return s.ValidUntil().After(first) })
	if err := s.Err(); err != nil {
		t.Fatalf("session lost: %v", err)
	}
}

func TestClient_Close(t *testing.T) {
	srv := testserver.Start(t)
	c, err := client.New([]string{srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	s := newSession(t, c)
	m := client.NewMutex(s, "close")
	if err := m.TryLock(testCtx(t)); err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	within(t, "session Done after Client.Close", s.Done())
	if err := s.Err(); !errors.Is(err, client.ErrClosed) {
		t.Errorf("Err() = %v, want client.ErrClosed", err)
	}
	within(t, "grant context cancelled after Client.Close", m.Context().Done())
	if _, err := c.NewSession(testCtx(t)); !errors.Is(err, client.ErrClosed) {
		t.Errorf("NewSession after Close = %v, want client.ErrClosed", err)
	}
	// Close released the lock on the server.
	other := newSession(t, newClient(t, []string{srv.Addr()}))
	if err := client.NewMutex(other, "close").TryLock(testCtx(t)); err != nil {
		t.Errorf("TryLock after the holder's Client closed: %v", err)
	}
}

// TestClient_CloseWaitsForGoroutines checks that no goroutine of the SDK
// outlives Close, also when its connection was cut.
func TestClient_CloseWaitsForGoroutines(t *testing.T) {
	srv := testserver.Start(t)
	p, err := faultproxy.New(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	defer p.SetMode(faultproxy.Pass)

	c, err := client.New([]string{p.Addr()}, client.WithRequestTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	s := newSession(t, c, client.WithTTL(time.Second))
	if err := client.NewMutex(s, "leak").Lock(testCtx(t)); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if _, err := c.Acquire(testCtx(t), "leak-lease", time.Minute); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	p.SetMode(faultproxy.Blackhole)
	within(t, "jeopardy", s.Jeopardy())
	if sdkGoroutines() == 0 {
		t.Fatalf("no goroutines of package client found before Close; the check is broken")
	}
	c.Close()
	// A goroutine Close waited for has called wg.Done as its last step but
	// may still be unwinding for a moment: give it a bounded grace.
	deadline := time.Now().Add(time.Second)
	for sdkGoroutines() != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := sdkGoroutines(); n != 0 {
		t.Errorf("%d goroutines of package client left after Close:\n%s", n, allStacks())
	}
}

func allStacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

// sdkGoroutines counts the goroutines running code of package client.
func sdkGoroutines() int {
	n := 0
	for _, g := range strings.Split(allStacks(), "\n\n") {
		if strings.Contains(g, "fenced/client.") && !strings.Contains(g, "fenced/client_test.") {
			n++
		}
	}
	return n
}
