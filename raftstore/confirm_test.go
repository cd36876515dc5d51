package raftstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/raftstore"
)

// ConfirmLeader answers while the leader's state machine is stalled and
// raft's main loop waits behind it (VerifyLeader, the negative control,
// times out then), on one node and on three; and on three it confirms
// nothing once the followers are gone, stalled or not.
func TestNode_ConfirmLeaderDoesNotWaitForApplies(t *testing.T) {
	for _, size := range []int{1, 3} {
		t.Run(map[int]string{1: "one node", 3: "three nodes"}[size], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			block := make(chan struct{})
			var proposals sync.WaitGroup
			unblock := sync.OnceFunc(func() { close(block); proposals.Wait() })
			defer unblock()
			nodes := make([]*raftstore.Node, size)
			for i := range nodes {
				cfg := testConfig(t, t.TempDir())
				cfg.NodeID = []string{"n1", "n2", "n3"}[i]
				cfg.Bootstrap = i == 0
				cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = time.Second, time.Second, time.Second
				// No window of entries in flight: entries pile up behind the
				// stalled state machine until raft's main loop waits for it
				// (with the default window of 1 it never does; a stall of the
				// main loop is what this test needs).
				cfg.MaxEntriesInFlight = 0
				c := &counter{}
				if i == 0 {
					c.block = block
				}
				nodes[i] = open(t, cfg, c)
			}
			n1 := nodes[0]
			waitLeader(t, n1)
			for _, n := range nodes[1:] {
				if err := n1.AddVoter(ctx, n.ID(), n.Addr()); err != nil {
					t.Fatalf("AddVoter(%s): %v", n.ID(), err)
				}
			}
			barrier(t, n1)
			if err := n1.ConfirmLeader(ctx); err != nil {
				t.Fatalf("ConfirmLeader on an idle leader: %v", err)
			}
			for _, n := range nodes[1:] {
				if err := n.ConfirmLeader(ctx); !errors.Is(err, fence.ErrNotLeader) {
					t.Errorf("ConfirmLeader on follower %s = %v, want fence.ErrNotLeader", n.ID(), err)
				}
			}

			// Stall the state machine, then commit entries until raft's main
			// loop waits behind it: VerifyLeader no longer answers.
			propose := func(cmd string) {
				proposals.Add(1)
				go func() {
					defer proposals.Done()
					_, _ = n1.Propose(ctx, cmd)
				}()
			}
			propose("block")
			// Raft hands the state machine up to 128 batches of entries
			// before its main loop waits, and a batch holds up to 64
			// entries: without the race detector's slowness 5,000
			// proposals were too few on one node (the first thousands
			// went out in batches of 64).
			stalled := false
			for i, deadline := 0, time.Now().Add(30*time.Second); i < 50000 && !stalled && time.Now().Before(deadline); i++ {
				propose("inc")
				vctx, vcancel := context.WithTimeout(ctx, 200*time.Millisecond)
				err := n1.VerifyLeader(vctx)
				vcancel()
				switch {
				case errors.Is(err, context.DeadlineExceeded):
					stalled = true
				case err != nil:
					t.Fatalf("VerifyLeader while stalling: %v", err)
				}
			}
			if !stalled {
				t.Fatal("raft's main loop never stalled behind the state machine: the test shows nothing")
			}
			for range 3 {
				start := time.Now()
				if err := n1.ConfirmLeader(ctx); err != nil {
					t.Fatalf("ConfirmLeader with the state machine stalled: %v", err)
				}
				t.Logf("confirmed in %v with raft's main loop stalled", time.Since(start))
			}

			if size == 1 {
				return
			}
			for _, n := range nodes[1:] {
				if err := n.Shutdown(); err != nil {
					t.Fatalf("Shutdown(%s): %v", n.ID(), err)
				}
			}
			cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
			defer ccancel()
			if err := n1.ConfirmLeader(cctx); err == nil {
				t.Fatal("ConfirmLeader confirmed a leader whose followers are all shut down")
			}
			unblock()
			cctx, ccancel = context.WithTimeout(ctx, 2*time.Second)
			defer ccancel()
			if err := n1.ConfirmLeader(cctx); err == nil {
				t.Fatal("ConfirmLeader confirmed a leader whose followers are all shut down, with its main loop free")
			}
		})
	}
}
