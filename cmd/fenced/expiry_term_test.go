package main_test

import (
	"context"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/proctest"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// Session expiry across a leader change, with real processes. Expiries are
// stamped with the term of the leadership that proposed them, and the
// state machine ignores one older than the newest leadership it applied:
//
//   - the leader of a paused, deposed term wakes up with every session's
//     deadline long past in its own table; whatever it proposes then must
//     not end the session that renews on the new leader;
//   - the new leader must expire the sessions nobody renews: an expiry it
//     stamped with any term older than its own would be ignored and the
//     dead session's lock held for good.
func TestCluster_ExpiryTermAcrossLeaderChange(t *testing.T) {
	servers := proctest.StartCluster(t, 3)
	leader, followers := leaderOf(t, servers)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The live session renews through the SDK, on whichever node leads.
	const liveTTL = 6 * time.Second
	c := quietClient(t, strings.Split(proctest.Endpoints(servers), ",")...)
	live, err := c.NewSession(ctx, client.WithTTL(liveTTL))
	if err != nil {
		t.Fatal(err)
	}
	m := client.NewMutex(live, "live")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	// The dead session is created and takes its lock through the raw API,
	// and is never renewed.
	dead := deadSession(ctx, t, leader.Addr, "dead", 3*time.Second)

	// Pause the leader for longer than the live session's TTL: when it
	// wakes it still believes it leads and finds both sessions overdue.
	if err := leader.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			leader.Signal(syscall.SIGCONT)
		}
	}()
	time.Sleep(liveTTL + 2*time.Second)
	select {
	case <-live.Done():
		t.Fatalf("session lost while the old leader was paused: %v", live.Err())
	default:
	}
	leader.Signal(syscall.SIGCONT)
	resumed = true

	// Let the old leader's expiry loop run, step down and catch up.
	time.Sleep(3 * time.Second)
	select {
	case <-live.Done():
		t.Fatalf("the live session was ended after the deposed leader resumed: %v", live.Err())
	default:
	}
	for _, s := range servers {
		lc := fencedv1connect.NewLockServiceClient(http.DefaultClient, "http://"+s.Addr)
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := lc.Describe(rctx, connect.NewRequest(&fencedv1.DescribeRequest{Name: "live"}))
		rcancel()
		if err != nil {
			t.Fatalf("Describe(live) on %s: %v", s.NodeID, err)
		}
		if h := resp.Msg.GetLock().GetHolder(); h.GetSession() != live.ID() || h.GetToken() != uint64(m.Token()) {
			t.Fatalf("holder of live on %s = %v, want session %d with token %v", s.NodeID, h, live.ID(), m.Token())
		}
	}

	// The new leader expired the dead session: it is gone and its lock is
	// free.
	other := quietClient(t, followers[0].Addr, followers[1].Addr)
	eventually(t, "the dead session expired", 20*time.Second, func() bool {
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		defer rcancel()
		st, err := other.Status(rctx, "")
		if err != nil {
			return false
		}
		for _, s := range st.GetSessions() {
			if s.GetSession() == dead {
				return false
			}
		}
		return true
	})
	l, err := other.Acquire(ctx, "dead", 10*time.Second)
	if err != nil {
		t.Fatalf("Acquire of the dead session's lock after its expiry: %v", err)
	}
	l.Release(ctx)
	if err := m.Unlock(ctx); err != nil {
		t.Errorf("Unlock of the live session's lock: %v", err)
	}
}

// deadSession creates a session with ttl on addr through the raw API and
// takes lock name with it, and returns the session's id. Nothing renews it.
func deadSession(ctx context.Context, t *testing.T, addr, name string, ttl time.Duration) uint64 {
	t.Helper()
	sc := fencedv1connect.NewSessionServiceClient(http.DefaultClient, "http://"+addr)
	sresp, err := sc.CreateSession(ctx, connect.NewRequest(&fencedv1.CreateSessionRequest{TtlMs: ttl.Milliseconds(), RequestId: "dead-" + name}))
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	id := sresp.Msg.GetSession()
	lc := fencedv1connect.NewLockServiceClient(http.DefaultClient, "http://"+addr)
	aresp, err := lc.Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: name, Session: id, Secret: sresp.Msg.GetSecret(), Seq: 1, RequestId: "dead-acquire-" + name}))
	if err != nil || !aresp.Msg.GetGranted() {
		t.Fatalf("Acquire(%q) with session %d: %v %v", name, id, aresp, err)
	}
	return id
}
