package main_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fenced-dev/fenced/internal/proctest"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// A session that lives only in a snapshot (its creation was compacted out
// of the log) still expires after a restart: the node tracks the deadlines
// of the sessions a snapshot restores, so their locks do not stay held
// for good.
func TestServe_SessionsRestoredFromSnapshotExpire(t *testing.T) {
	srv := proctest.StartServer(t, "--snapshot-threshold", "1", "--snapshot-interval", "20ms", "--trailing-logs", "0")
	base := "http://" + srv.Addr
	sessions := fencedv1connect.NewSessionServiceClient(http.DefaultClient, base)
	locks := fencedv1connect.NewLockServiceClient(http.DefaultClient, base)
	ctx := context.Background()

	held, err := sessions.CreateSession(ctx, connect.NewRequest(&fencedv1.CreateSessionRequest{TtlMs: 1500}))
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	if _, err := locks.Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: "a", Session: held.Msg.Session, Secret: held.Msg.Secret, Seq: 1})); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	acquired := time.Now()
	// Wait for a snapshot that covers the acquire, then kill the node
	// before the session's TTL runs out.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if snapshotSince(srv.DataDir, acquired) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no snapshot within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	srv.Kill()
	srv.Start()

	waiter, err := sessions.CreateSession(ctx, connect.NewRequest(&fencedv1.CreateSessionRequest{TtlMs: 30000}))
	if err != nil {
		t.Fatalf("CreateSession after restart: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	resp, err := locks.Acquire(wctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: "a", Session: waiter.Msg.Session, Secret: waiter.Msg.Secret, Seq: 1, WaitMs: 15000}))
	if err != nil {
		t.Fatalf("Acquire after restart: %v (the restored session never expired)\n%s", err, srv.Log())
	}
	if resp.Msg.GetGrant().GetSession() != waiter.Msg.Session {
		t.Fatalf("granted %+v, want the waiting session %d", resp.Msg.GetGrant(), waiter.Msg.Session)
	}
}

// snapshotSince reports whether the node in dataDir completed a snapshot
// that it started after t.
func snapshotSince(dataDir string, t time.Time) bool {
	metas, _ := filepath.Glob(filepath.Join(dataDir, "raft", "snapshots", "*", "meta.json"))
	for _, m := range metas {
		if fi, err := os.Stat(m); err == nil && fi.ModTime().After(t.Add(20*time.Millisecond)) {
			return true
		}
	}
	return false
}
