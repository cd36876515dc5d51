package raftstore

import (
	"context"
	"fmt"
)

// ReadIndex makes a read of this node's state that follows it linearizable
// (Raft's read-index): it confirms with a quorum that this node still
// leads, then waits until the state machine has applied every entry
// committed at that point, woken by the applies themselves. A read served
// without it could miss a write already acknowledged, for instance by the
// previous leader.
//
// The commit index covers every acknowledged write only once this leader
// has committed an entry of its own term; Barrier does that, and the caller
// must not serve reads before its Barrier returned. ReadIndex fails with an
// error wrapping fence.ErrNotLeader when the node is not, or is no longer,
// the leader, and with ctx's error when ctx ends first.
func (n *Node) ReadIndex(ctx context.Context) error {
	if err := n.VerifyLeader(ctx); err != nil {
		return err
	}
	commit := n.raft.CommitIndex()
	if err := n.fsm.applied.wait(ctx, commit, n.done); err != nil {
		return fmt.Errorf("read index: wait for apply of index %d: %w", commit, err)
	}
	return nil
}

// AppliedIndex returns the index of the last command or configuration
// entry applied. Raft's own entries (the no-op of a new term, barriers)
// never reach the state machine; the index passes them with the next
// entry applied.
func (n *Node) AppliedIndex() uint64 { return n.fsm.applied.load() }
