package raftstore_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/raftstore"
)

// roundTrip is the counter with a RoundTripCodec: its Decode hands out
// decodedCmd, not the string proposed, so Apply tells the commands it got
// from the proposer from the ones decoded, by index.
type roundTrip struct {
	counter
	mu           sync.Mutex
	own, decoded int // commands applied as proposed, and decoded
}

// decodedCmd is a counter command as roundTrip.Decode returns it.
type decodedCmd string

var _ raftstore.RoundTripCodec = (*roundTrip)(nil)

// RoundTrips vouches for every entry but one holding "undecodable".
func (r *roundTrip) RoundTrips(cmds []any) bool {
	return !slices.Contains(cmds, any("undecodable"))
}

func (r *roundTrip) Decode(entry []byte, dst []any) ([]any, error) {
	start := len(dst)
	dst, err := r.counter.Decode(entry, dst)
	for i := start; i < len(dst); i++ {
		dst[i] = decodedCmd(dst[i].(string))
	}
	return dst, err
}

func (r *roundTrip) Apply(cmds []raftstore.Command) error {
	r.mu.Lock()
	for i := range cmds {
		d, ok := cmds[i].Cmd.(decodedCmd)
		if ok {
			cmds[i].Cmd = string(d)
		}
		if ok {
			r.decoded++
		} else {
			r.own++
		}
	}
	r.mu.Unlock()
	return r.counter.Apply(cmds)
}

// how counts the commands applied as proposed and decoded.
func (r *roundTrip) how() (own, decoded int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.own, r.decoded
}

// With a RoundTripCodec the proposing node applies the commands it was
// given, not decoded again, also those of a proposal whose caller gave up
// (its context ran out while the state machine was stalled: the entry
// was committed and is applied later); every entry replayed after a
// restart is decoded, and the state is the same either way; an entry the
// codec does not vouch for is decoded on its proposer too (and stops it
// when it does not decode). No proposal's commands are kept once it
// returned.
func TestNode_AppliesItsOwnProposalsUndecoded(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.MaxEntriesInFlight = 0 // the inc below goes to raft behind the stalled block
	block, blocked := make(chan struct{}), make(chan struct{}, 1)
	r := &roundTrip{counter: counter{block: block, blocked: blocked}}
	n, err := raftstore.Open(cfg, r)
	if err != nil {
		t.Fatal(err)
	}
	waitLeader(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 5 {
		if res, err := n.Propose(ctx, "inc"); err != nil || res != uint64(i+1) {
			t.Fatalf("inc %d: %v, %v", i+1, res, err)
		}
	}
	if own, decoded := r.how(); own != 5 || decoded != 0 {
		t.Fatalf("%d commands applied as proposed, %d decoded; want 5 and 0", own, decoded)
	}
	stalled := make(chan error, 1)
	go func() { _, err := n.Propose(ctx, "block"); stalled <- err }()
	// The inc goes to raft once the block is being applied: proposed any
	// earlier, it could commit and apply before the block reached raft.
	select {
	case <-blocked:
	case <-ctx.Done():
		t.Fatal("the block was not applied within 10 s")
	}
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = n.Propose(short, "inc") // committed, not applied in time
	cancelShort()
	if err == nil {
		t.Fatal("a proposal answered while the state machine was stalled")
	}
	close(block)
	if err := <-stalled; err != nil {
		t.Fatalf("block: %v", err)
	}
	if res, err := n.Propose(ctx, "inc"); err != nil || res != uint64(7) {
		t.Fatalf("inc after the stall: %v, %v; want 7 (the timed-out inc applied)", res, err)
	}
	// The inc whose caller gave up is applied as proposed when its entry
	// is still registered at its apply, and decoded when its proposal
	// returned first (its registration ends then): on a loaded machine
	// either comes first. Every other command is applied as proposed.
	if own, decoded := r.how(); own+decoded != 8 || decoded > 1 {
		t.Fatalf("%d commands applied as proposed, %d decoded; want 8 in all, at most the timed-out one decoded", own, decoded)
	}
	if p := n.ProposedPending(); p != 0 {
		t.Fatalf("%d proposals' commands still kept", p)
	}
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}

	again := &roundTrip{}
	n2 := open2(t, cfg, again)
	waitLeader(t, n2)
	if res, err := n2.Propose(ctx, "inc"); err != nil || res != uint64(8) {
		t.Fatalf("inc after the restart: %v, %v; want 8 (the 8 entries replayed, one a block)", res, err)
	}
	if own, decoded := again.how(); own != 1 || decoded != 8 {
		t.Fatalf("after the restart %d commands applied as proposed, %d decoded; want 1 and the 8 replayed", own, decoded)
	}

	// An entry the codec does not vouch for is decoded on its proposer
	// too: one that does not decode stops it.
	if _, err := n2.Propose(ctx, "undecodable"); !errors.Is(err, raftstore.ErrOutcomeUnknown) {
		t.Fatalf("Propose(undecodable): %v, want ErrOutcomeUnknown", err)
	}
	if err := waitStopped(t, n2); !errors.Is(err, raftstore.ErrDamaged) {
		t.Fatalf("Err() = %v, want ErrDamaged", err)
	}
	if p := n2.ProposedPending(); p != 0 {
		t.Fatalf("%d proposals' commands still kept", p)
	}
}

// open2 is open for any state machine.
func open2(t *testing.T, cfg raftstore.Config, sm raftstore.StateMachine) *raftstore.Node {
	t.Helper()
	n, err := raftstore.Open(cfg, sm)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = n.Shutdown() })
	return n
}
