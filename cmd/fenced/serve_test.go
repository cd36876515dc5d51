package main_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fenced-dev/fenced/internal/bounded"
	"github.com/fenced-dev/fenced/internal/proctest"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// tokenLog records every token a client was told it was granted, by the
// phase its request was sent in: a request sent before the kill may be
// acknowledged after it (its reply was already on its way), and belongs
// with the grants made before the kill.
type tokenLog struct {
	mu     sync.Mutex
	before []grant
	after  []grant
	phase  int // 0 before the kill, 1 after the restart
}

// grant is one acknowledged grant. A session that re-acquires a lock it
// still holds (its release was lost to the kill) is told the same grant
// again: same token, same session.
type grant struct {
	token   uint64
	session uint64
}

// current returns the phase a request sent now belongs to.
func (l *tokenLog) current() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.phase
}

// add records g, granted to a request sent in phase.
func (l *tokenLog) add(phase int, g *fencedv1.Grant) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if phase == 0 {
		l.before = append(l.before, grant{g.Token, g.Session})
	} else {
		l.after = append(l.after, grant{g.Token, g.Session})
	}
}

// TestServe_KillRestartTokensMonotonic kills a real `fenced serve` process
// with SIGKILL while clients acquire and release, restarts it on the same
// data dir and checks that every token granted after the restart is above
// every token granted before the kill, and that no token repeats.
func TestServe_KillRestartTokensMonotonic(t *testing.T) {
	srv := proctest.StartServer(t)
	base := "http://" + srv.Addr
	sessions := fencedv1connect.NewSessionServiceClient(http.DefaultClient, base)
	locks := fencedv1connect.NewLockServiceClient(http.DefaultClient, base)

	var log tokenLog
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for c := 0; c < 8; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var session, seq uint64
			var secret string
			name := fmt.Sprintf("lock-%d", c%3)
			for ctx.Err() == nil {
				if session == 0 {
					rctx, rcancel := context.WithTimeout(ctx, time.Second)
					resp, err := sessions.CreateSession(rctx, connect.NewRequest(&fencedv1.CreateSessionRequest{TtlMs: 30000}))
					rcancel()
					if err != nil {
						time.Sleep(20 * time.Millisecond)
						continue
					}
					session, secret = resp.Msg.Session, resp.Msg.Secret
				}
				seq++
				phase := log.current()
				rctx, rcancel := context.WithTimeout(ctx, time.Second)
				resp, err := locks.Acquire(rctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: name, Session: session, Secret: secret, Seq: seq, WaitMs: 200}))
				rcancel()
				if err != nil {
					if connect.CodeOf(err) == connect.CodeNotFound {
						session, seq = 0, 0
					}
					time.Sleep(20 * time.Millisecond)
					continue
				}
				if !resp.Msg.Granted {
					continue
				}
				log.add(phase, resp.Msg.Grant)
				seq++
				rctx, rcancel = context.WithTimeout(ctx, time.Second)
				locks.Release(rctx, connect.NewRequest(&fencedv1.ReleaseRequest{Name: name, Session: session, Secret: secret, Seq: seq}))
				rcancel()
			}
		}()
	}

	waitFor(t, 45*time.Second, func() bool { log.mu.Lock(); defer log.mu.Unlock(); return len(log.before) >= 200 })
	srv.Kill()
	log.mu.Lock()
	log.phase = 1
	log.mu.Unlock()
	srv.Start()
	// Generous: a restart on a loaded machine may take seconds to elect.
	waitFor(t, 45*time.Second, func() bool { log.mu.Lock(); defer log.mu.Unlock(); return len(log.after) >= 200 })
	cancel()
	bounded.Wait(t, "workers", time.Minute, &wg)

	var maxBefore uint64
	owner := map[uint64]uint64{} // token -> session
	for _, g := range log.before {
		maxBefore = max(maxBefore, g.token)
	}
	for _, g := range append(log.before, log.after...) {
		if s, ok := owner[g.token]; ok && s != g.session {
			t.Fatalf("token %d was granted to session %d and to session %d", g.token, s, g.session)
		}
		owner[g.token] = g.session
	}
	for _, g := range log.after {
		if g.token <= maxBefore && !slices.Contains(log.before, g) {
			t.Fatalf("token %d granted after the restart is not above %d, granted before the kill", g.token, maxBefore)
		}
	}
	t.Logf("%d grants before SIGKILL (max token %d), %d after restart", len(log.before), maxBefore, len(log.after))
}

// TestServe_GracefulShutdown checks that SIGTERM stops the server with exit
// status 0 and that a restart on the same data dir keeps the token counter.
func TestServe_GracefulShutdown(t *testing.T) {
	srv := proctest.StartServer(t)
	locks := fencedv1connect.NewLockServiceClient(http.DefaultClient, "http://"+srv.Addr)
	ctx := context.Background()
	first, err := locks.Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: "x", TtlMs: 10000}))
	if err != nil || !first.Msg.Granted {
		t.Fatalf("acquire: %v %v", first, err)
	}
	srv.Signal(syscall.SIGTERM)
	if !srv.Wait(15 * time.Second) {
		t.Fatal("fenced serve did not exit 15s after SIGTERM")
	}
	if code := srv.ExitCode(); code != 0 {
		t.Fatalf("exit code after SIGTERM=%d, want 0\n%s", code, srv.Log())
	}
	srv.Start()
	second, err := locks.Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: "y", TtlMs: 10000}))
	if err != nil || !second.Msg.Granted {
		t.Fatalf("acquire after restart: %v %v", second, err)
	}
	if second.Msg.Grant.Token <= first.Msg.Grant.Token {
		t.Fatalf("token after restart %d, want above %d", second.Msg.Grant.Token, first.Msg.Grant.Token)
	}
	if second.Msg.Grant.Issuer != first.Msg.Grant.Issuer {
		t.Fatalf("issuer changed across restart: %q, then %q", first.Msg.Grant.Issuer, second.Msg.Grant.Issuer)
	}
}

// TestServe_TokenFloor checks --token-floor on a fresh cluster.
func TestServe_TokenFloor(t *testing.T) {
	srv := proctest.StartServer(t, "--token-floor", "1000000")
	locks := fencedv1connect.NewLockServiceClient(http.DefaultClient, "http://"+srv.Addr)
	resp, err := locks.Acquire(context.Background(), connect.NewRequest(&fencedv1.AcquireRequest{Name: "x", TtlMs: 10000}))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Msg.Grant.Token; got <= 1000000 {
		t.Fatalf("first token with --token-floor 1000000 is %d, want above 1000000", got)
	}
}

func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestServe_SnapshotOnSIGUSR1: SIGUSR1 takes a Raft snapshot that a
// restart after kill -9 restores from, holders included; asked again, the
// server answers and goes on serving.
func TestServe_SnapshotOnSIGUSR1(t *testing.T) {
	srv := proctest.StartServer(t)
	locks := fencedv1connect.NewLockServiceClient(http.DefaultClient, "http://"+srv.Addr)
	ctx := context.Background()
	first, err := locks.Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: "x", TtlMs: 60000}))
	if err != nil || !first.Msg.Granted {
		t.Fatalf("acquire: %v %v", first, err)
	}
	if err := srv.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the snapshot", 30*time.Second, func() bool { return strings.Contains(srv.Log(), "snapshot taken (SIGUSR1)") })
	if !strings.Contains(srv.Log(), "raft: state encoded for a snapshot") {
		t.Errorf("no encode time logged:\n%s", srv.Log())
	}
	metas, _ := filepath.Glob(filepath.Join(srv.DataDir, "raft", "snapshots", "*", "meta.json"))
	if len(metas) == 0 {
		t.Fatalf("no snapshot in %s after SIGUSR1", srv.DataDir)
	}
	if err := srv.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	// Taken again or refused (nothing new applied): either way answered.
	eventually(t, "the second SIGUSR1 answered", 30*time.Second, func() bool {
		return strings.Count(srv.Log(), "snapshot taken (SIGUSR1)")+strings.Count(srv.Log(), "snapshot (SIGUSR1) not taken") >= 2
	})
	srv.Kill()
	srv.Start()
	if !strings.Contains(srv.Log(), "restored from snapshot") {
		t.Errorf("the restart did not restore the snapshot:\n%s", srv.Log())
	}
	second, err := locks.Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: "x", TtlMs: 60000}))
	if err != nil {
		t.Fatal(err)
	}
	if second.Msg.Granted {
		t.Fatalf("lock x granted again after the restart (token %d): the snapshot lost its holder", second.Msg.Grant.Token)
	}
}
