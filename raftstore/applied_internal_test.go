package raftstore

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A wait returns once an advance reaches its target, not on an earlier
// advance, and ends with its context or the node.
func TestAppliedIndex_Wait(t *testing.T) {
	var a appliedIndex
	a.advance(3)
	if err := a.wait(context.Background(), 3, nil); err != nil {
		t.Fatalf("wait for an index already applied: %v", err)
	}

	got := make(chan error, 1)
	go func() { got <- a.wait(context.Background(), 10, nil) }()
	for _, i := range []uint64{5, 9} {
		time.Sleep(10 * time.Millisecond)
		a.advance(i)
		select {
		case err := <-got:
			t.Fatalf("wait for 10 returned %v after an advance to %d", err, i)
		default:
		}
	}
	a.advance(10)
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("wait for 10: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("wait for 10 did not return after the advance to 10")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := a.wait(ctx, 11, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("wait with an ending context = %v, want context.DeadlineExceeded", err)
	}
	done := make(chan struct{})
	close(done)
	if err := a.wait(context.Background(), 11, done); !errors.Is(err, ErrShutdown) {
		t.Errorf("wait on a shut down node = %v, want ErrShutdown", err)
	}
}
