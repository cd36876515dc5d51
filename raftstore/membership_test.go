package raftstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/raftstore"
)

// waitKnownLeader waits up to 10s until n knows id as the leader, following
// KnownLeader.
func waitKnownLeader(t *testing.T, n *raftstore.Node, id string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		l := n.KnownLeader()
		if l.ID == id {
			return
		}
		select {
		case <-l.Changed:
		case <-timeout:
			t.Fatalf("node %s does not know %s as leader after 10s; it knows %q", n.ID(), id, l.ID)
		}
	}
}

// Members join, leadership moves where it is asked to and every member
// hears of it, and bad membership changes are refused without effect.
func TestNode_Membership(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nodes := make([]*raftstore.Node, 3)
	for i, id := range []string{"n1", "n2", "n3"} {
		cfg := testConfig(t, t.TempDir())
		cfg.NodeID = id
		cfg.Bootstrap = i == 0
		// A leadership transfer must finish within one election timeout;
		// 50 ms is too short for a loaded machine running the race detector.
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 300*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond
		nodes[i] = open(t, cfg, &counter{})
	}
	n1 := nodes[0]
	waitLeader(t, n1)
	for _, n := range nodes[1:] {
		if err := n1.AddVoter(ctx, n.ID(), n.Addr()); err != nil {
			t.Fatalf("AddVoter(%s): %v", n.ID(), err)
		}
	}
	ms, err := n1.Members()
	if err != nil || len(ms) != 3 {
		t.Fatalf("Members() = %+v, %v; want 3 members", ms, err)
	}
	for _, bad := range []struct{ id, addr string }{{"n2", "127.0.0.1:1"}, {"n4", nodes[2].Addr()}, {"", "127.0.0.1:1"}} {
		if err := n1.AddVoter(ctx, bad.id, bad.addr); !errors.Is(err, fence.ErrInvalidArgument) {
			t.Errorf("AddVoter(%q, %q) = %v, want fence.ErrInvalidArgument", bad.id, bad.addr, err)
		}
	}
	if err := n1.RemoveMember(ctx, "n9"); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Errorf("RemoveMember(n9) = %v, want fence.ErrInvalidArgument", err)
	}
	if _, err := n1.TransferLeadership(ctx, "n9"); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Errorf("TransferLeadership(n9) = %v, want fence.ErrInvalidArgument", err)
	}
	if ms, _ := n1.Members(); len(ms) != 3 {
		t.Errorf("after refused changes Members() = %+v, want the same 3", ms)
	}

	leader, err := n1.TransferLeadership(ctx, "n2")
	if err != nil || leader != "n2" {
		t.Fatalf("TransferLeadership(n2) = %q, %v; want n2", leader, err)
	}
	for _, n := range nodes {
		waitKnownLeader(t, n, "n2")
	}
	n2 := nodes[1]
	waitLeader(t, n2)
	if err := n1.RemoveMember(ctx, "n3"); !errors.Is(err, fence.ErrNotLeader) {
		t.Errorf("RemoveMember on a follower = %v, want fence.ErrNotLeader", err)
	}
	if err := n2.RemoveMember(ctx, "n3"); err != nil {
		t.Fatalf("RemoveMember(n3): %v", err)
	}
	if ms, _ := n2.Members(); len(ms) != 2 {
		t.Errorf("after RemoveMember(n3) Members() = %+v, want 2", ms)
	}
	barrier(t, n2)
	if err := n2.ReadIndex(ctx); err != nil {
		t.Errorf("ReadIndex on the new leader: %v", err)
	}
}
