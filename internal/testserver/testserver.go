// Package testserver starts an in-process fenced server for tests of other
// packages: a real single-node Raft cluster on loopback with a temporary
// data directory.
package testserver

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/internal/launch"
	"github.com/fenced-dev/fenced/server"
)

// Server is a running test server.
type Server struct {
	*server.Server
	// Config is the configuration it was started with; restart with it to
	// reopen the same data dir.
	Config server.Config
}

// Option changes the configuration before the server starts.
type Option func(*server.Config)

// WithDataDir uses dir instead of a fresh temporary directory.
func WithDataDir(dir string) Option {
	return func(c *server.Config) { c.Raft.DataDir = dir }
}

// WithTokenFloor starts the cluster's token counter at floor.
func WithTokenFloor(floor fence.Token) Option {
	return func(c *server.Config) { c.TokenFloor = floor }
}

// Start starts a server on 127.0.0.1 with free ports and waits until it is
// ready to serve writes (bounded: it fails the test after 20s). The server
// is shut down when the test ends.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	srv, err := Launch(t.TempDir(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	return srv
}

// Launch is Start for code without a testing.TB, such as an Example: it
// starts a server with its data in dataDir and waits until it is ready
// (at most 20s). The caller stops it with Stop.
func Launch(dataDir string, opts ...Option) (*Server, error) {
	return launchServer(dataDir, "", opts)
}

// LaunchTLS is Launch for a server whose options put its API on TLS with
// the files of certsDir (the CA, and NODE-ID.crt and .key, as fenced certs
// makes them): it waits for readiness over TLS, presenting the node's own
// certificate.
func LaunchTLS(dataDir, certsDir string, opts ...Option) (*Server, error) {
	return launchServer(dataDir, certsDir, opts)
}

func launchServer(dataDir, certsDir string, opts []Option) (*Server, error) {
	cfg := server.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Raft.PeerListen = "127.0.0.1:0"
	cfg.Raft.DataDir = dataDir
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	// A single node elects itself after one heartbeat timeout; keep tests quick.
	cfg.Raft.HeartbeatTimeout = 100 * time.Millisecond
	cfg.Raft.ElectionTimeout = 100 * time.Millisecond
	cfg.Raft.LeaderLeaseTimeout = 100 * time.Millisecond
	// Segments are preallocated; keep a test's disk use small.
	cfg.Raft.WALSegmentSize = launch.TestSegmentBytes
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := server.Start(cfg)
	if err != nil {
		return nil, fmt.Errorf("start server: %w", err)
	}
	s := &Server{Server: srv, Config: cfg}
	ready := func() error { return launch.WaitReady(context.Background(), srv.Addr(), 20*time.Second) }
	if certsDir != "" {
		ready = func() error {
			return launch.Node{ID: cfg.Raft.NodeID, Addr: srv.Addr(), CertsDir: certsDir}.WaitReady(context.Background(), 20*time.Second)
		}
	}
	if err := ready(); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// Stop shuts the server down, waiting at most 10s.
func (s *Server) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.Shutdown(ctx)
}

// WaitReady polls addr's /readyz until it answers 200, failing the test
// after 20s.
func WaitReady(t testing.TB, addr string) {
	t.Helper()
	if err := launch.WaitReady(context.Background(), addr, 20*time.Second); err != nil {
		t.Fatal(err)
	}
}
