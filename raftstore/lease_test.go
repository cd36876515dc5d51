package raftstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/raftstore"
)

// With lease reads a leader serves reads on its lease while its followers
// answer, and stops within the lease's length of losing them: no read is
// served on the lease later than HeartbeatTimeout / (1 + LeaseClockDrift)
// after the followers stopped, although raft itself keeps the leader in
// office for LeaderLeaseTimeout (twice as long here).
func TestNode_LeaseReadsEndWithTheLease(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const hb = time.Second
	const drift = 1.0
	lease := time.Duration(float64(hb) / (1 + drift))
	nodes := make([]*raftstore.Node, 3)
	for i, id := range []string{"n1", "n2", "n3"} {
		cfg := testConfig(t, t.TempDir())
		cfg.NodeID = id
		cfg.Bootstrap = i == 0
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = hb, hb, hb
		cfg.LeaseReads, cfg.LeaseClockDrift = true, drift
		nodes[i] = open(t, cfg, &counter{})
	}
	n1 := nodes[0]
	waitLeader(t, n1)
	for _, n := range nodes[1:] {
		if err := n1.AddVoter(ctx, n.ID(), n.Addr()); err != nil {
			t.Fatalf("AddVoter(%s): %v", n.ID(), err)
		}
	}
	barrier(t, n1)
	applyN(t, n1, 3, 1)

	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := n1.ReadIndex(ctx); err != nil {
			t.Fatalf("ReadIndex with both followers up: %v", err)
		}
		if l, _ := n1.LeaseReads(); l > 0 {
			break
		}
		if time.Now().After(deadline) {
			l, q := n1.LeaseReads()
			t.Fatalf("no read served on the lease within 20s (lease %d, quorum %d)", l, q)
		}
		time.Sleep(time.Millisecond)
	}
	if ls, _ := nodes[1].LeaseReads(); ls != 0 {
		t.Errorf("a follower served %d reads on a lease", ls)
	}

	var wg sync.WaitGroup
	for _, n := range nodes[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.Shutdown(); err != nil {
				t.Errorf("Shutdown(%s): %v", n.ID(), err)
			}
		}()
	}
	wg.Wait()
	stopped := time.Now()

	var lastLease time.Duration
	failed := false
	for time.Since(stopped) < 3*hb {
		before, _ := n1.LeaseReads()
		start := time.Now()
		rctx, rcancel := context.WithTimeout(ctx, 100*time.Millisecond)
		err := n1.ReadIndex(rctx)
		rcancel()
		after, _ := n1.LeaseReads()
		if after > before {
			if err != nil {
				t.Fatalf("a read served on the lease failed: %v", err)
			}
			lastLease = start.Sub(stopped)
			if lastLease >= lease {
				t.Fatalf("read served on the lease %v after the followers stopped; the lease lasts %v", lastLease, lease)
			}
		} else if err != nil {
			failed = true
		} else {
			t.Fatalf("read served with a quorum round trip %v after both followers stopped", start.Sub(stopped))
		}
	}
	if !failed {
		t.Fatalf("reads never failed within %v of losing the quorum", 3*hb)
	}
	t.Logf("last read on the lease %v after the followers stopped (lease %v)", lastLease, lease)
}
