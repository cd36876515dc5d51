package raftstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/raftstore"
)

// waitStopped waits up to 10s for n to stop on its own and returns why.
func waitStopped(t *testing.T, n *raftstore.Node) error {
	t.Helper()
	select {
	case <-n.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the node did not stop within 10s")
	}
	err := n.Err()
	if err == nil {
		t.Fatal("the node stopped without an error")
	}
	return err
}

// A committed entry that does not decode stops the node with an error
// naming the entry; it is never skipped: reopened, the node applies the
// entries before it and stops at it again.
func TestNode_StopsOnAnEntryThatDoesNotDecode(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	c := &counter{}
	n := open(t, cfg, c)
	waitLeader(t, n)
	applyN(t, n, 3, 1)
	_, err := n.Propose(context.Background(), "undecodable")
	if !errors.Is(err, raftstore.ErrOutcomeUnknown) {
		t.Fatalf("Propose(undecodable): %v, want ErrOutcomeUnknown", err)
	}
	stopped := waitStopped(t, n)
	if !errors.Is(stopped, raftstore.ErrDamaged) {
		t.Fatalf("Err() = %v, want ErrDamaged", stopped)
	}
	if _, err := n.Propose(context.Background(), "inc"); err == nil {
		t.Fatal("a stopped node accepted a command")
	}
	if got, _ := c.get(); got != 3 {
		t.Fatalf("count %d, want 3", got)
	}

	// Shutdown returns once the stop has released the data dir.
	_ = n.Shutdown()
	again := &counter{}
	n2 := open(t, cfg, again)
	if err := waitStopped(t, n2); !errors.Is(err, raftstore.ErrDamaged) {
		t.Fatalf("reopened: Err() = %v, want ErrDamaged", err)
	}
	if got, _ := again.get(); got != 3 {
		t.Fatalf("reopened: count %d, want the 3 entries before the damaged one", got)
	}
}

// A state machine that cannot go on (Apply's error) stops the node; the
// command's result never reaches its proposer.
func TestNode_StopsWhenTheStateMachineCannotGoOn(t *testing.T) {
	n := open(t, testConfig(t, t.TempDir()), &counter{})
	waitLeader(t, n)
	applyN(t, n, 2, 1)
	res, err := n.Propose(context.Background(), "cannot go on")
	if !errors.Is(err, raftstore.ErrOutcomeUnknown) {
		t.Fatalf("Propose: %v, %v; want ErrOutcomeUnknown", res, err)
	}
	if stopped := waitStopped(t, n); stopped.Error() == "" || errors.Is(stopped, raftstore.ErrDamaged) {
		t.Fatalf("Err() = %v, want the state machine's error", stopped)
	}
}
