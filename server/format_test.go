package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// formatTestConfig is a single node on loopback with quick elections.
func formatTestConfig(t *testing.T, dir string) Config {
	cfg := DefaultConfig()
	cfg.Listen, cfg.Raft.PeerListen, cfg.Raft.DataDir = "127.0.0.1:0", "127.0.0.1:0", dir
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Raft.HeartbeatTimeout, cfg.Raft.ElectionTimeout, cfg.Raft.LeaderLeaseTimeout = 100*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond
	return cfg
}

// startServing starts a server with cfg and waits until it leads and
// serves (its takeover done).
func startServing(t *testing.T, cfg Config) *Server {
	t.Helper()
	s, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); s.serving.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			s.Shutdown(context.Background())
			t.Fatal("no leader within 20s")
		}
	}
	return s
}

// waitStoppedWith waits for s to stop on its own and checks why.
func waitStoppedWith(t *testing.T, s *Server, what string) {
	t.Helper()
	select {
	case <-s.Done():
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: the server did not stop", what)
	}
	err := s.Err()
	if !errors.Is(err, fsm.ErrFormatVersion) || !strings.Contains(err.Error(), "format version 2") || !strings.Contains(err.Error(), "Upgrades") {
		t.Fatalf("%s: Err() = %v, want the format version 2 named with the upgrade rule", what, err)
	}
}

// A committed entry of a format version this build does not apply (a
// newer member proposed it) stops the node with a message naming the
// version, through the real write path; it is never skipped: restarted on
// the same data dir, the node stops at it again.
func TestServer_StopsOnAFutureFormatVersion(t *testing.T) {
	cfg := formatTestConfig(t, t.TempDir())
	s := startServing(t, cfg)
	defer s.Shutdown(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.propose(ctx, &statev1.Command{Op: &statev1.Command_NewLeader{NewLeader: &statev1.NewLeader{Term: 1}}}); err != nil {
		t.Fatalf("a command of this version: %v", err)
	}
	future := &statev1.Command{FormatVersion: fsm.FormatVersion + 1, Op: &statev1.Command_NewLeader{NewLeader: &statev1.NewLeader{Term: 1}}}
	if _, err := s.propose(ctx, future); err == nil {
		t.Fatal("a command of a future version was applied")
	}
	waitStoppedWith(t, s, "after the entry")

	again, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Shutdown(context.Background())
	waitStoppedWith(t, again, "restarted")
}
