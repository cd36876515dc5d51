package raftstore

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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

// gatedSum is a state machine for the window test: it sums int commands,
// records how many commands each Apply call got, and, while hold is set,
// blocks each Apply until released.
type gatedSum struct {
	mu      sync.Mutex
	sum     int
	batches []int
	entered chan struct{} // told when an Apply call starts
	release chan struct{} // an Apply call waits for one receive while held
	held    atomic.Bool
}

func (g *gatedSum) Size(any) int { return 8 }
func (g *gatedSum) Encode(cmds []any) ([]byte, error) {
	var b []byte
	for _, c := range cmds {
		b = binary.AppendVarint(b, int64(c.(int)))
	}
	return b, nil
}
func (g *gatedSum) Decode(entry []byte, dst []any) ([]any, error) {
	for len(entry) > 0 {
		v, n := binary.Varint(entry)
		if n <= 0 {
			return dst, errors.New("bad varint")
		}
		dst = append(dst, int(v))
		entry = entry[n:]
	}
	return dst, nil
}
func (g *gatedSum) Apply(cmds []Command) error {
	if g.held.Load() {
		g.entered <- struct{}{}
		<-g.release
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.batches = append(g.batches, len(cmds))
	for i := range cmds {
		g.sum += cmds[i].Cmd.(int)
		cmds[i].Result = g.sum
	}
	return nil
}
func (g *gatedSum) Snapshot() ([]byte, error) { return binary.AppendVarint(nil, int64(g.sum)), nil }
func (g *gatedSum) Restore(b []byte) error {
	v, _ := binary.Varint(b)
	g.sum = int(v)
	return nil
}

// openGated opens a one-node cluster over a gatedSum with a window of
// one entry in flight, waits until it leads, and returns it with a
// context that bounds the test.
func openGated(t *testing.T) (*Node, *gatedSum, context.Context) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.PeerListen = "127.0.0.1:0"
	cfg.Bootstrap = true
	cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 50*time.Millisecond, 50*time.Millisecond, 50*time.Millisecond
	cfg.ShutdownTimeout = time.Second
	cfg.MaxEntriesInFlight = 1
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	sm := &gatedSum{entered: make(chan struct{}), release: make(chan struct{})}
	n, err := Open(cfg, sm)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Shutdown() })
	// Runs first: a failing test must not leave raft's FSM goroutine held.
	t.Cleanup(func() { sm.held.Store(false); close(sm.release) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	for !n.Leadership().Leader {
		select {
		case <-n.Leadership().Changed:
		case <-ctx.Done():
			t.Fatal("no leader")
		}
	}
	if err := n.Barrier(ctx); err != nil {
		t.Fatal(err)
	}

	return n, sm, ctx
}

// With MaxEntriesInFlight 1, commands proposed while an entry is on its
// way wait for it, and then all go into one entry together; every one of
// them is applied once and answered with its own result.
func TestPropose_WindowGathersWhatWaits(t *testing.T) {
	n, sm, ctx := openGated(t)
	sm.held.Store(true)
	first := make(chan error, 1)
	go func() {
		_, err := n.Propose(ctx, 1000)
		first <- err
	}()
	<-sm.entered // the first entry is being applied, its window place taken
	sm.held.Store(false)

	const waiting = 20
	results := make(chan proposalResult, waiting)
	var wg sync.WaitGroup
	for i := range waiting {
		wg.Go(func() {
			res, err := n.Propose(ctx, i+1)
			results <- proposalResult{res, err}
		})
	}
	// All of them wait in the queue: none may reach raft while the window
	// is full.
	for {
		n.proposer.mu.Lock()
		queued, inflight := len(n.proposer.queue), n.proposer.inflight
		n.proposer.mu.Unlock()
		if inflight != 1 {
			t.Fatalf("%d entries in flight with a window of 1", inflight)
		}
		if queued == waiting {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("only %d of %d proposals queued", queued, waiting)
		}
		runtime.Gosched()
	}
	sm.release <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(results)
	seen := map[any]bool{}
	for r := range results {
		if r.err != nil {
			t.Fatalf("propose: %v", r.err)
		}
		if seen[r.res] {
			t.Fatalf("result %v answered twice", r.res)
		}
		seen[r.res] = true
	}
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if want := 1000 + waiting*(waiting+1)/2; sm.sum != want {
		t.Fatalf("sum %d, want %d: a command was lost or applied twice", sm.sum, want)
	}
	// The last two Apply calls: the first entry alone, then every command
	// that waited, in one entry.
	if k := len(sm.batches); k < 2 || sm.batches[k-2] != 1 || sm.batches[k-1] != waiting {
		t.Fatalf("commands per applied entry %v, want ..., 1, %d", sm.batches, waiting)
	}
	// The committer hands out the results before it yields
	// (nextEntryYields) and finds the queue empty: it gives its window
	// place back soon after the last caller has its answer, not before.
	for {
		n.proposer.mu.Lock()
		queued, inflight := len(n.proposer.queue), n.proposer.inflight
		n.proposer.mu.Unlock()
		if inflight == 0 && queued == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("after the commits: %d in flight, %d queued; want 0 and 0", inflight, queued)
		}
		runtime.Gosched()
	}
}

// ProposeWithin bounds a proposal by its timeout as a context deadline
// would: a command still queued behind a held entry when its timeout
// passes is answered DeadlineExceeded (outcome unknown, as for a
// context), and, since its caller gave up before it was handed to raft,
// is then dropped, never applied. The timers it reuses fire for their
// own timeout only: after many proposals that finished before theirs,
// one waits its full timeout.
func TestProposeWithin_Timeout(t *testing.T) {
	n, sm, tctx := openGated(t)
	// Without a deadline, so that the timeouts bound the proposals; the
	// test's bound ends it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := context.AfterFunc(tctx, cancel)
	defer stop()
	for i := range 50 { // timers stopped early and put back for reuse
		if _, err := n.ProposeWithin(ctx, 1, time.Duration(i+1)*time.Millisecond+time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	sm.held.Store(true)
	first := make(chan error, 1)
	go func() {
		_, err := n.ProposeWithin(ctx, 1000, time.Hour)
		first <- err
	}()
	<-sm.entered
	sm.held.Store(false)

	const timeout = 100 * time.Millisecond
	start := time.Now()
	_, err := n.ProposeWithin(ctx, 7, timeout)
	if took := time.Since(start); took < timeout {
		t.Errorf("ProposeWithin %v gave up after %v", timeout, took)
	}
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrOutcomeUnknown) {
		t.Errorf("ProposeWithin past its timeout = %v, want DeadlineExceeded, outcome unknown", err)
	}
	// A context's deadline, when set, is the bound, not the timeout.
	dctx, dcancel := context.WithTimeout(ctx, timeout)
	defer dcancel()
	_, err = n.ProposeWithin(dctx, 11, time.Hour)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ProposeWithin with a context deadline past it = %v, want DeadlineExceeded", err)
	}
	sm.release <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	// The next entry is committed after the dropped ones were looked at.
	res, err := n.ProposeWithin(ctx, 100, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if want := 50 + 1000 + 100; res != want {
		t.Fatalf("sum %v, want %d: a command whose caller gave up was applied", res, want)
	}
}

// A queued command whose ProposeWithin timeout passed is dropped as one
// whose context ended is.
func TestCommit_DropsProposalsPastTheirTimeout(t *testing.T) {
	late := &proposal{ctx: context.Background(), deadline: time.Now().Add(-time.Millisecond), cmd: "late", done: make(chan proposalResult, 1)}
	live := dropAbandoned([]*proposal{late})
	if len(live) != 0 {
		t.Fatalf("dropAbandoned kept %d proposals, want none", len(live))
	}
	if r := <-late.done; !errors.Is(r.err, context.DeadlineExceeded) || errors.Is(r.err, ErrOutcomeUnknown) {
		t.Fatalf("late proposal answered %v, want DeadlineExceeded, not proposed", r.err)
	}
}
