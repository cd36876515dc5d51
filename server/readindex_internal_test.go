package server

import (
	"context"
	"errors"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
)

// A read is served only by a leader that finished taking over in the term
// it leads now. The serving term is set by the goroutine that follows the
// leadership, which lags raft: a node that lost its leadership and won a
// later term has the old term in serving until that goroutine catches up,
// and before this term's Barrier its state may miss writes the leader in
// between acknowledged. readIndex must refuse then, with and without lease
// reads (the lease proves no other leader, not that this one caught up).
func TestReadIndex_RefusesAServingTermThatIsNotTheLeadersTerm(t *testing.T) {
	for _, lease := range []bool{false, true} {
		cfg := formatTestConfig(t, t.TempDir())
		cfg.Raft.LeaseReads = lease
		s := startServing(t, cfg)
		defer s.Shutdown(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.readIndex(ctx); err != nil {
			t.Fatalf("lease %v: read on the serving leader: %v", lease, err)
		}
		term := s.serving.Load()
		if term < 2 {
			t.Fatalf("serving term %d: want a bootstrapped node's first election, term 2 or above, so an older term is not 0", term)
		}
		// What the lagging goroutine leaves behind: the term of a
		// leadership that ended.
		s.serving.Store(term - 1)
		if err := s.readIndex(ctx); !errors.Is(err, fence.ErrNotLeader) {
			t.Fatalf("lease %v: read with serving term %d while leading term %d: %v, want not leader (still taking over)", lease, term-1, term, err)
		}
		s.serving.Store(term)
		s.Shutdown(context.Background())
	}
}
