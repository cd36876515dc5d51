package raftstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/raftstore"
)

// preparingCounter is a counter whose node's results pass through
// PrepareResults before their proposers get them: it adds 1000 to each
// and records the sizes of the entries it saw.
var _ raftstore.ResultPreparer = (*preparingCounter)(nil)

type preparingCounter struct {
	counter
	seenMu  sync.Mutex // guards entries (counter has a mutex of its own)
	entries []int
}

func (p *preparingCounter) PrepareResults(results []any) {
	p.seenMu.Lock()
	p.entries = append(p.entries, len(results))
	p.seenMu.Unlock()
	for i, r := range results {
		if n, ok := r.(uint64); ok {
			results[i] = n + 1000
		}
	}
}

// A ResultPreparer sees the results of every entry its node proposed,
// all the commands of an entry at once, before any proposer gets its
// result: each proposer gets what PrepareResults made of its own.
func TestNode_PrepareResultsBeforeTheProposersGetThem(t *testing.T) {
	sm := &preparingCounter{}
	n := open2(t, testConfig(t, t.TempDir()), sm)
	waitLeader(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const proposers = 16
	got := make(chan uint64, proposers)
	var wg sync.WaitGroup
	for range proposers {
		wg.Go(func() {
			res, err := n.Propose(ctx, "inc")
			if err != nil {
				t.Error(err)
				return
			}
			got <- res.(uint64)
		})
	}
	wg.Wait()
	close(got)
	seen := map[uint64]bool{}
	for r := range got {
		if r <= 1000 || r > 1000+proposers || seen[r] {
			t.Errorf("a proposer got %d: want its own count (1 to %d) plus the 1000 PrepareResults adds, once", r, proposers)
		}
		seen[r] = true
	}
	sm.seenMu.Lock()
	defer sm.seenMu.Unlock()
	total := 0
	for _, e := range sm.entries {
		total += e
	}
	if total != proposers {
		t.Errorf("PrepareResults saw entries of %v commands, %d in all, want %d", sm.entries, total, proposers)
	}
}
