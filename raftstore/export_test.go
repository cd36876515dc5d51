package raftstore

// DetachReadAcks makes ReadIndex read the acknowledgements (for its quorum
// confirmation, and for the leader lease with lease reads) from a tracker
// the transport does not feed, as if every answer raft's VerifyLeader
// counted were to a heartbeat sent before the read began; the function
// returned reattaches the transport's. Tests only; not while a ReadIndex
// runs.
func (n *Node) DetachReadAcks() (reattach func()) {
	fed, lease := n.acks, n.lease
	n.acks = newLeaseTracker(n.cfg)
	if lease != nil {
		n.lease = n.acks
	}
	return func() { n.acks, n.lease = fed, lease }
}

// ProposedPending is how many entries' proposed commands the node keeps
// for its state machine (RoundTripCodec). Tests only.
func (n *Node) ProposedPending() int { return n.fsm.proposed.len() }
