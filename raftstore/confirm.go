package raftstore

import (
	"context"
	"errors"
	"fmt"
)

// ConfirmLeader checks, as VerifyLeader does, that this node still led at
// some moment after the call started, but without queueing behind the
// state machine: raft's VerifyLeader is answered by raft's main loop, which
// stops whenever the state machine's queue of committed entries is full (a
// slow apply, a snapshot's encoding), so under load it can wait for
// seconds while the leadership it checks is not in doubt.
//
// It returns nil as soon as either of two confirmations arrives:
//
//   - a quorum of the voters (with this node) accepted an AppendEntries of
//     this node's term sent after the call started. Raft's heartbeats,
//     sent every tenth of HeartbeatTimeout by goroutines of their own,
//     provide them whatever the main loop is doing. Sound without any
//     clock assumption: a member that accepted an AppendEntries of this
//     term had not yet voted in a later one, and a later leader needs the
//     vote of a member of every quorum, so no later leader existed when
//     the call started. (The send time is read on this node's monotonic
//     clock before the request goes out; no other clock is compared.)
//   - raft's VerifyLeader, started at once, succeeds; it is the faster of
//     the two on an idle leader (one round trip, no wait for a heartbeat).
//
// A node that is the only voter confirms its leadership at once. It fails
// with an error wrapping fence.ErrNotLeader when the node is not, or is no
// longer, the leader (VerifyLeader's answer), and with ctx's error when ctx
// ends first. Like VerifyLeader it confirms leadership at a moment, not for
// any time after it.
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
	verified := make(chan error, 1)
	go func() { verified <- n.VerifyLeader(vctx) }()
	for {
		acked, changed := n.acks.acked(q.term, q.others, q.need, since)
		if acked {
			if term, still := n.leaderTerm(); !still || term != q.term {
				return fmt.Errorf("confirm leader: %w", n.notLeaderError(errors.New("leadership lost")))
			}
			return nil
		}
		select {
		case err := <-verified:
			return err
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("confirm leader: %w", ctx.Err())
		case <-n.done:
			return fmt.Errorf("confirm leader: %w", ErrShutdown)
		}
	}
}
