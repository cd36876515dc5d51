package raftstore

// Stats is a node's Raft state at one moment, for status pages and metrics.
// The fields are read one after another, not atomically together.
type Stats struct {
	// NodeID is this node's ID.
	NodeID string
	// State is "Follower", "Candidate", "Leader" or "Shutdown".
	State string
	// Term is the current term.
	Term uint64
	// LastLogIndex is the index of the last entry in the log or the last
	// snapshot.
	LastLogIndex uint64
	// CommitIndex is the index of the last entry known to be committed.
	CommitIndex uint64
	// AppliedIndex is the index of the last entry handed to the state
	// machine.
	AppliedIndex uint64
	// LeaderID and LeaderAddr name the leader this node knows of; empty when
	// it knows none.
	LeaderID, LeaderAddr string
}

// Stats returns the node's current Raft state. It does not block on Raft's
// main loop and works after Shutdown.
func (n *Node) Stats() Stats {
	id, addr := n.Leader()
	return Stats{
		NodeID:       n.cfg.NodeID,
		State:        n.raft.State().String(),
		Term:         n.raft.CurrentTerm(),
		LastLogIndex: n.raft.LastIndex(),
		CommitIndex:  n.raft.CommitIndex(),
		AppliedIndex: n.raft.AppliedIndex(),
		LeaderID:     id,
		LeaderAddr:   addr,
	}
}
