package server

// TakeSnapshot takes a Raft snapshot of this node's state now and lets
// Raft compact the log behind it, as the node does on its own once
// --snapshot-threshold entries have accumulated (fenced serve does it on
// SIGUSR1). It fails while another snapshot is being taken and, wrapping
// raft's ErrNothingNewToSnapshot, when nothing was applied since the last.
func (s *Server) TakeSnapshot() error { return s.node.Snapshot() }
