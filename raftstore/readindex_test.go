package raftstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/raftstore"
)

// ReadIndex confirms the leadership with AppendEntries sent after it was
// called, not with raft's VerifyLeader alone: VerifyLeader counts the
// answer to a heartbeat that was already on its way, so a leader stopped
// with heartbeats in flight and deposed meanwhile could, once resumed,
// count its followers' answers from before the new election and read its
// old state. With the acknowledgements ReadIndex reads cut off from the
// transport (every answer VerifyLeader counts is then, for ReadIndex, one
// sent before the read), VerifyLeader still succeeds but ReadIndex must
// not; reattached, it succeeds at once. Without lease reads (the default)
// and with them (detached, the lease has no acknowledgement either, so
// ReadIndex falls back to the quorum).
func TestNode_ReadIndexCountsOnlyHeartbeatsSentAfterTheReadBegan(t *testing.T) {
	for _, lease := range []bool{false, true} {
		nodes := make([]*raftstore.Node, 3)
		for i, id := range []string{"n1", "n2", "n3"} {
			cfg := testConfig(t, t.TempDir())
			cfg.NodeID, cfg.Bootstrap = id, i == 0
			cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = time.Second, time.Second, time.Second
			cfg.LeaseReads = lease
			nodes[i] = open(t, cfg, &counter{})
		}
		n1 := nodes[0]
		waitLeader(t, n1)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, n := range nodes[1:] {
			if err := n1.AddVoter(ctx, n.ID(), n.Addr()); err != nil {
				t.Fatalf("AddVoter(%s): %v", n.ID(), err)
			}
		}
		barrier(t, n1)
		if err := n1.ReadIndex(ctx); err != nil {
			t.Fatalf("lease %v: ReadIndex on the leader: %v", lease, err)
		}
		reattach := n1.DetachReadAcks()
		if err := n1.VerifyLeader(ctx); err != nil {
			t.Fatalf("lease %v: VerifyLeader with the acknowledgements detached: %v", lease, err)
		}
		short, stop := context.WithTimeout(ctx, 2*time.Second)
		err := n1.ReadIndex(short)
		stop()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("lease %v: ReadIndex with no heartbeat sent since it began seen answered: %v, want it to wait until its deadline", lease, err)
		}
		// ConfirmLeader (renewals) counts the same acknowledgements, and
		// not VerifyLeader's success.
		short, stop = context.WithTimeout(ctx, 2*time.Second)
		err = n1.ConfirmLeader(short)
		stop()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("lease %v: ConfirmLeader with no heartbeat sent since it began seen answered: %v, want it to wait until its deadline", lease, err)
		}
		reattach()
		if err := n1.ConfirmLeader(ctx); err != nil {
			t.Fatalf("lease %v: ConfirmLeader reattached: %v", lease, err)
		}
		if err := n1.ReadIndex(ctx); err != nil {
			t.Fatalf("lease %v: ReadIndex reattached: %v", lease, err)
		}
	}
}
