package main_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/proctest"
)

// A client given [follower, leader, follower] moves to the leader after its
// first call, which the follower forwards and answers with the leader's
// address: its later calls (unary, the lock pipeline, the session's
// keep-alive) no longer go through the follower. With WithFollowLeader(false)
// every call is forwarded, which shows the counter measures what it should.
func TestCluster_ClientFollowsLeader(t *testing.T) {
	servers := proctest.StartCluster(t, 3)
	leader, followers := leaderOf(t, servers)
	endpoints := []string{followers[0].Addr, leader.Addr, followers[1].Addr}
	const calls = 20
	run := func(follow bool) (first, later float64) {
		c, ctx, done := clusterClient(t, endpoints, client.WithFollowLeader(follow))
		defer done()
		before := forwarded(t, followers[0].Addr)
		if _, err := c.KVGet(ctx, "absent"); !errors.Is(err, client.ErrKeyNotFound) {
			t.Fatalf("kv get: %v, want ErrKeyNotFound", err)
		}
		mid := forwarded(t, followers[0].Addr)
		for range calls {
			if _, err := c.KVGet(ctx, "absent"); !errors.Is(err, client.ErrKeyNotFound) {
				t.Fatalf("kv get: %v, want ErrKeyNotFound", err)
			}
		}
		s, err := c.NewSession(ctx, client.WithTTL(10*time.Second))
		if err != nil {
			t.Fatalf("new session: %v", err)
		}
		m := client.NewMutex(s, "follow")
		for range 5 {
			if err := m.Lock(ctx); err != nil {
				t.Fatalf("lock: %v", err)
			}
			if err := m.Unlock(ctx); err != nil {
				t.Fatalf("unlock: %v", err)
			}
		}
		return mid - before, forwarded(t, followers[0].Addr) - mid
	}
	if first, later := run(true); first != 1 || later != 0 {
		t.Fatalf("following the leader: the follower forwarded %v first call(s) and %v later ones, want 1 and 0", first, later)
	}
	if first, later := run(false); first != 1 || later < calls {
		t.Fatalf("not following: the follower forwarded %v first call(s) and %v later ones, want 1 and at least %d", first, later, calls)
	}
}

// With the native protocol, a follower refuses the native hello and names
// the leader: a Client whose first call is a pipelined acquire moves to
// the leader at once and runs its pipeline there natively, one native
// connection on the leader, none on the follower and nothing forwarded.
// ProtocolConnect, the control, has the follower forward the call.
func TestCluster_NativeFollowsLeader(t *testing.T) {
	servers := proctest.StartCluster(t, 3)
	leader, followers := leaderOf(t, servers)
	endpoints := []string{followers[0].Addr, leader.Addr, followers[1].Addr}
	run := func(p client.Protocol) (fwd, nativeOnLeader float64) {
		c, ctx, done := clusterClient(t, endpoints, client.WithProtocol(p))
		defer done()
		before := forwarded(t, followers[0].Addr)
		l, err := c.Acquire(ctx, "native-follow-"+p.String(), 10*time.Second)
		if err != nil {
			t.Fatalf("%v: acquire: %v", p, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("%v: release: %v", p, err)
		}
		if n := metricOf(t, followers[0].Addr, "fenced_api_native_connections_open"); n != 0 {
			t.Fatalf("%v: %v native connections open on the follower", p, n)
		}
		return forwarded(t, followers[0].Addr) - before, metricOf(t, leader.Addr, "fenced_api_native_connections_open")
	}
	if fwd, n := run(client.ProtocolNative); fwd != 0 || n != 1 {
		t.Fatalf("native: the follower forwarded %v calls and the leader has %v native connections, want 0 and 1", fwd, n)
	}
	deadline := time.Now().Add(20 * time.Second)
	for metricOf(t, leader.Addr, "fenced_api_native_connections_open") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the closed Client's native connection is still open on the leader")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if fwd, n := run(client.ProtocolConnect); fwd < 1 || n != 0 {
		t.Fatalf("connect: the follower forwarded %v calls and the leader has %v native connections, want at least 1 and 0", fwd, n)
	}
}

// clusterClient returns a Client of endpoints and a context of a minute;
// done closes both.
func clusterClient(t *testing.T, endpoints []string, opts ...client.Option) (*client.Client, context.Context, func()) {
	t.Helper()
	c, err := client.New(endpoints, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	return c, ctx, func() {
		cancel()
		c.Close()
	}
}
