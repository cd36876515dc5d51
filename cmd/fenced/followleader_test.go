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
		c, err := client.New(endpoints, client.WithFollowLeader(follow))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
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
