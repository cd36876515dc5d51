package raftstore

import (
	"context"
	"errors"
	"testing"
)

// A command whose caller gave up while it waited in the group-commit queue
// is answered "not proposed" and never handed to raft; the others keep
// their order.
func TestCommit_DropsProposalsWhoseCallerGaveUp(t *testing.T) {
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	mk := func(ctx context.Context, cmd string) *proposal {
		return &proposal{ctx: ctx, cmd: cmd, done: make(chan proposalResult, 1)}
	}
	a, b, c := mk(context.Background(), "a"), mk(gone, "b"), mk(context.Background(), "c")
	live := dropAbandoned([]*proposal{a, b, c})
	if len(live) != 2 || live[0] != a || live[1] != c {
		t.Fatalf("dropAbandoned kept %v, want a and c in order", live)
	}
	select {
	case r := <-b.done:
		if !errors.Is(r.err, context.Canceled) {
			t.Fatalf("abandoned proposal answered %v, want context.Canceled", r.err)
		}
	default:
		t.Fatal("abandoned proposal got no answer")
	}
	if len(a.done) != 0 || len(c.done) != 0 {
		t.Fatal("live proposals were answered before they were proposed")
	}
}
