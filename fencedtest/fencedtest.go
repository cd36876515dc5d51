// Package fencedtest runs a real fenced server inside a Go test, in the
// spirit of net/http/httptest: a single-node cluster (Raft, its log and
// snapshots on a temporary directory, the API on a free loopback port) in
// the test's own process, so that an application's tests exercise its
// lock handling and its stale-writer path against the real thing, without
// mocks.
//
//	srv := fencedtest.Start(t)
//	c := srv.Client(t) // a *client.Client for srv, closed when the test ends
//	s, _ := c.NewSession(ctx)
//	m := client.NewMutex(s, "orders")
//	m.Lock(ctx)
//	srv.ExpireSession(ctx, s.ID()) // as if the holder had paused past its TTL
//
// ExpireSession ends a session through the server's normal expiry path,
// so its lock goes to the next waiter with a higher token at once, while
// the holder, like a paused process, carries on with its old token until
// a guard rejects it.
package fencedtest

import (
	"context"
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/testserver"
	"github.com/fenced-dev/fenced/server"
)

// Server is a running single-node fenced server.
type Server struct {
	ts *testserver.Server
}

// Option changes the server's configuration before it starts.
type Option func(*server.Config)

// WithTokenFloor makes the server issue only tokens above floor, as
// `fenced serve --token-floor` does.
func WithTokenFloor(floor fence.Token) Option {
	return func(c *server.Config) { c.TokenFloor = floor }
}

// WithConfig lets fn change any setting of the server (limits, the auth
// file, revoke) before it starts. The addresses and the data dir are
// chosen by the package.
func WithConfig(fn func(*server.Config)) Option { return Option(fn) }

// Start starts a server for the test and waits until it serves writes
// (failing the test after 20s). It is stopped when the test ends.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s, err := New(t.TempDir(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// New is Start for code without a testing.TB, such as an Example: it
// keeps its data in dataDir and the caller stops it with Close.
func New(dataDir string, opts ...Option) (*Server, error) {
	topts := make([]testserver.Option, len(opts))
	for i, o := range opts {
		topts[i] = testserver.Option(o)
	}
	ts, err := testserver.Launch(dataDir, topts...)
	if err != nil {
		return nil, err
	}
	return &Server{ts: ts}, nil
}

// Addr is the server's API address, host:port on loopback.
func (s *Server) Addr() string { return s.ts.Addr() }

// Endpoints is Addr as the endpoint list client.New takes.
func (s *Server) Endpoints() []string { return []string{s.ts.Addr()} }

// Client returns a client of the server, closed when the test ends.
func (s *Server) Client(t testing.TB, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(s.Endpoints(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ExpireSession ends the session as if its TTL had run out, through the
// server's normal expiry path (a committed expiry, as the leader proposes
// for a lease that ran out): its locks go to their next waiters with
// higher tokens, and its client learns of it when its next renewal is
// refused — not before, just as a paused holder would not. It returns once
// the expiry is applied.
func (s *Server) ExpireSession(ctx context.Context, id uint64) error {
	return s.ts.ExpireSession(ctx, id)
}

// Close stops the server, waiting at most 10s.
func (s *Server) Close() error {
	s.ts.Stop()
	return nil
}
