package raftstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// ReadIndex makes a read of this node's state that follows it linearizable
// (Raft's read-index): it confirms with a quorum that this node still
// leads, then waits until the state machine has applied every entry
// committed at that point, woken by the applies themselves (it reads the
// log only when the state machine is behind, to skip raft's own entries).
// A read served without it could miss a write already acknowledged, for
// instance by the previous leader.
//
// The commit index covers every acknowledged write only once this leader
// has committed an entry of its own term; Barrier does that, and the caller
// must not serve reads before its Barrier returned. ReadIndex fails with an
// error wrapping fence.ErrNotLeader when the node is not, or is no longer,
// the leader, and with ctx's error when ctx ends first.
//
// With Config.LeaseReads, ReadIndex returns at once while this node holds
// its leader lease (lease.go): no other leader can have committed anything
// yet, and every write this leader acknowledged was applied here first.
// The caller must read the state after ReadIndex returns, not before: the
// lease is checked at the moment of the call.
//
// The quorum's confirmation counts only AppendEntries sent after ReadIndex
// was called: raft's VerifyLeader also counts the answer to a heartbeat
// that was already on its way (replication.go: the heartbeat loop
// notifies every verification waiting when an answer arrives), so a
// leader stopped with a heartbeat in flight, deposed meanwhile, and
// resumed could count its followers' answers from before the new
// election as a confirmation, and read its old state. ReadIndex asks
// VerifyLeader (which also sends heartbeats at once), then waits until a
// quorum accepted AppendEntries sent since it started, recorded by the
// transport with their send times.
func (n *Node) ReadIndex(ctx context.Context) error {
	if n.lease != nil {
		if n.leaseHeld() {
			n.lease.served.Add(1)
			return nil
		}
		n.lease.fellBack.Add(1)
	}
	since := leaseClock()
	if err := n.VerifyLeader(ctx); err != nil {
		return err
	}
	if err := n.confirmedSince(ctx, since); err != nil {
		return err
	}
	commit := n.raft.CommitIndex()
	applied := n.fsm.applied.load()
	if applied >= commit {
		return nil
	}
	target, err := n.lastApplicable(applied, commit)
	if err != nil {
		return fmt.Errorf("read index: %w", err)
	}
	if err := n.fsm.applied.wait(ctx, target, n.done); err != nil {
		return fmt.Errorf("read index: wait for apply of index %d (committed %d): %w", target, commit, err)
	}
	return nil
}

// confirmedSince waits until a quorum accepted an AppendEntries of this
// node's current term sent after since (leaseTracker.acked), and fails
// when the node no longer leads, ctx ends or the node shuts down.
func (n *Node) confirmedSince(ctx context.Context, since time.Duration) error {
	recheck := time.NewTimer(n.cfg.HeartbeatTimeout / 10)
	defer recheck.Stop()
	for {
		q, ok := n.quorum()
		if !ok {
			return fmt.Errorf("verify leader: %w", n.notLeaderError(raft.ErrNotLeader))
		}
		if q.need == 0 {
			return nil
		}
		acked, next := n.acks.acked(q.term, q.others, q.need, since)
		if acked {
			return nil
		}
		select {
		case <-next:
		case <-recheck.C:
			// No answer for a while: check the leadership again (a
			// deposed leader's heartbeats are refused).
			recheck.Reset(n.cfg.HeartbeatTimeout / 10)
		case <-ctx.Done():
			return fmt.Errorf("verify leader: %w: no quorum accepted a heartbeat sent since the read began", ctx.Err())
		case <-n.done:
			return fmt.Errorf("verify leader: %w", ErrShutdown)
		}
	}
}

// lastApplicable returns the index of the last entry after applied and up
// to commit that reaches the state machine (a command or a configuration),
// or 0 when there is none. Raft's own entries, the no-op that opens a term
// and barriers, never reach it, so the applied index would never reach a
// commit index that ends on one. An entry no longer in the log is in the
// snapshot the state machine was restored from, and so is all before it;
// any other failure to read the log is an error (the read cannot be shown
// to follow every committed write).
func (n *Node) lastApplicable(applied, commit uint64) (uint64, error) {
	var l raft.Log
	for i := commit; i > applied; i-- {
		if err := n.logs.GetLog(i, &l); err != nil {
			if errors.Is(err, raft.ErrLogNotFound) {
				return 0, nil
			}
			return 0, fmt.Errorf("read log entry %d: %w", i, err)
		}
		if l.Type == raft.LogCommand || l.Type == raft.LogConfiguration {
			return i, nil
		}
	}
	return 0, nil
}

// AppliedIndex returns the index of the last command or configuration
// entry applied. Raft's own entries (the no-op of a new term, barriers)
// never reach the state machine; the index passes them with the next
// entry applied.
func (n *Node) AppliedIndex() uint64 { return n.fsm.applied.load() }
