package server

import (
	"context"
	"fmt"
)

// watchNode waits for the node to stop. When it stopped on its own (a log
// entry that does not decode, a token reservation that could not be
// recorded; raftstore.Node.Err), the server shuts down too and Err
// returns why: a node that cannot apply its log must not serve.
func (s *Server) watchNode() {
	<-s.node.Done()
	err := s.node.Err()
	if err == nil {
		return
	}
	err = fmt.Errorf("node %s stopped: %w", s.cfg.Raft.NodeID, err)
	s.failure.Store(&err)
	s.log.Error("fenced stopping: the node cannot go on", "node", s.cfg.Raft.NodeID, "data_dir", s.cfg.Raft.DataDir, "err", err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*shutdownGrace)
	defer cancel()
	_ = s.Shutdown(ctx)
}

// Err returns why the server stopped on its own (Done is closed then) or
// cannot go on (Failed is closed then: its disk stalled), or nil. A process
// serving it should exit non-zero with this error.
func (s *Server) Err() error {
	if p := s.failure.Load(); p != nil {
		return *p
	}
	return s.node.DiskHealth().Stalled
}
