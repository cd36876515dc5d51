package raftstore

import (
	"context"
	"fmt"
)

// ConfirmLeader checks, as VerifyLeader does, that this node still led at
// some moment after the call started, but without queueing behind the
// state machine: raft's VerifyLeader is answered by raft's main loop, which
// stops whenever the state machine's queue of committed entries is full (a
// slow apply, a snapshot's encoding), so under load it can wait for
// seconds while the leadership it checks is not in doubt.
//
// It returns nil once a quorum of the voters (with this node) accepted an
// AppendEntries of this node's term sent after the call started. Raft's
// heartbeats, sent every tenth of HeartbeatTimeout by goroutines of their
// own, provide them whatever the main loop is doing; VerifyLeader, started
// at once and not waited for, makes raft send heartbeats now, so an idle
// leader need not wait for the next one. This is sound without any clock
// assumption: a member that accepted an AppendEntries of this term had not
// yet voted in a later one, and a later leader needs the vote of a member
// of every quorum, so no later leader existed when the call started. (The
// send time is read on this node's monotonic clock before the request goes
// out; no other clock is compared.) VerifyLeader's own success is not
// taken as a confirmation: it also counts the answer to a heartbeat
// already in flight when it was called, which a leader paused, deposed and
// resumed could get from before the new election (ReadIndex, readindex.go).
//
// A node that is the only voter confirms its leadership at once. It fails
// with an error wrapping fence.ErrNotLeader when the node is not, or is no
// longer, the leader, and with ctx's error when ctx ends first. Like
// VerifyLeader it confirms leadership at a moment, not for any time after
// it.
func (n *Node) ConfirmLeader(ctx context.Context) error {
	since := leaseClock()
	q, ok := n.quorum()
	if !ok {
		// Not the leader, or a leader removing itself: raft answers.
		return n.VerifyLeader(ctx)
	}
	if q.need == 0 {
		return nil
	}
	vctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = n.VerifyLeader(vctx) }() // heartbeats now; see above
	if err := n.confirmedSince(ctx, since); err != nil {
		return fmt.Errorf("confirm leader: %w", err)
	}
	return nil
}
