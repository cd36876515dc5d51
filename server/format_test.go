package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
	"github.com/fenced-dev/fenced/raftstore"
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

// waitStoppedWith waits for s to stop on its own and checks why: a
// newer release's entry, its error naming want and the upgrade rule.
func waitStoppedWith(t *testing.T, s *Server, what, want string) {
	t.Helper()
	select {
	case <-s.Done():
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: the server did not stop", what)
	}
	err := s.Err()
	if !errors.Is(err, fsm.ErrFormatVersion) || !errors.Is(err, raftstore.ErrNewerFormat) || errors.Is(err, raftstore.ErrDamaged) ||
		!strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "upgrade this node") || !strings.Contains(err.Error(), "Upgrades") {
		t.Fatalf("%s: Err() = %v, want %q named with the upgrade rule, not damage", what, err, want)
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
	waitStoppedWith(t, s, "after the entry", "format version 2")

	again, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Shutdown(context.Background())
	waitStoppedWith(t, again, "restarted", "format version 2")
}

// A committed entry holding a field this build does not know (a newer
// leader wrote a command with a field it added, the format version
// unchanged) stops the node through the real write path, as a newer
// version does, instead of applying the command without the field; the
// acquire it carries is never granted, and restarted on the same data dir
// the node stops at it again. The same acquire without the field is
// granted (the control).
func TestServer_StopsOnAFieldItDoesNotKnow(t *testing.T) {
	cfg := formatTestConfig(t, t.TempDir())
	s := startServing(t, cfg)
	defer s.Shutdown(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	acquire := func(name string) *statev1.Command {
		return &statev1.Command{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Name: name, TtlMs: 60000, RequestId: name}}}
	}
	if res, err := s.propose(ctx, acquire("control")); err != nil || !res.Granted {
		t.Fatalf("an acquire this build knows: %+v, %v", res, err)
	}
	newer := acquire("newer")
	newer.GetAcquire().ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 999, protowire.VarintType), 1))
	if res, err := s.propose(ctx, newer); err == nil {
		t.Fatalf("an acquire with a field this build does not know was applied: %+v", res)
	}
	waitStoppedWith(t, s, "after the entry", "field 999 of fenced.state.v1.Acquire")

	again, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Shutdown(context.Background())
	waitStoppedWith(t, again, "restarted", "field 999 of fenced.state.v1.Acquire")
}
