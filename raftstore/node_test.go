package raftstore_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/raftstore"
)

// testConfig returns a config for a node in dir with fast timings and a free
// loopback port.
func testConfig(t testing.TB, dir string) raftstore.Config {
	t.Helper()
	cfg := raftstore.DefaultConfig()
	cfg.DataDir = dir
	cfg.PeerListen = "127.0.0.1:0"
	cfg.Bootstrap = true
	cfg.HeartbeatTimeout = 50 * time.Millisecond
	cfg.ElectionTimeout = 50 * time.Millisecond
	cfg.LeaderLeaseTimeout = 50 * time.Millisecond
	cfg.CommitTimeout = 5 * time.Millisecond
	cfg.ShutdownTimeout = time.Second
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	return cfg
}

// open opens a node and shuts it down when the test ends.
func open(t testing.TB, cfg raftstore.Config, fsm *counter) *raftstore.Node {
	t.Helper()
	n, err := raftstore.Open(cfg, fsm)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := n.Shutdown(); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return n
}

// waitLeader waits up to 10s until n says it leads, following Leadership.
func waitLeader(t testing.TB, n *raftstore.Node) raftstore.Leadership {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		l := n.Leadership()
		if l.Leader {
			return l
		}
		select {
		case <-l.Changed:
		case <-timeout:
			t.Fatalf("node did not become leader within 10s; stats %+v", n.Stats())
		}
	}
}

func applyN(t *testing.T, n *raftstore.Node, count int, first uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; i < count; i++ {
		resp, err := n.Propose(ctx, "inc")
		if err != nil {
			t.Fatalf("Propose #%d: %v", i, err)
		}
		if got, want := resp, first+uint64(i); got != want {
			t.Fatalf("Propose #%d response = %v, want %v", i, got, want)
		}
	}
}

func barrier(t *testing.T, n *raftstore.Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Barrier(ctx); err != nil {
		t.Fatalf("Barrier: %v", err)
	}
}

func TestNode_Propose(t *testing.T) {
	var applied sync.WaitGroup
	var mu sync.Mutex
	var hookCalls int
	cfg := testConfig(t, t.TempDir())
	cfg.OnApply = func(d time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err == nil && d > 0 {
			hookCalls++
		}
	}
	fsm := &counter{}
	n := open(t, cfg, fsm)
	l := waitLeader(t, n)

	applyN(t, n, 20, 1)

	// Concurrent proposals each get their own, distinct response.
	const workers, each = 8, 10
	seen := make(chan uint64, workers*each)
	for w := 0; w < workers; w++ {
		applied.Add(1)
		go func() {
			defer applied.Done()
			for i := 0; i < each; i++ {
				resp, err := n.Propose(context.Background(), "inc")
				if err != nil {
					t.Errorf("Propose: %v", err)
					return
				}
				seen <- resp.(uint64)
			}
		}()
	}
	applied.Wait()
	close(seen)
	distinct := map[uint64]bool{}
	for v := range seen {
		if v <= 20 || v > 20+workers*each || distinct[v] {
			t.Errorf("concurrent Propose response %d is out of range or repeated", v)
		}
		distinct[v] = true
	}
	if got, _ := fsm.get(); got != 20+workers*each {
		t.Errorf("counter = %d, want %d", got, 20+workers*each)
	}

	// A response of type error is returned as the response.
	resp, err := n.Propose(context.Background(), "bogus")
	if err != nil {
		t.Fatalf("Propose(bogus): %v", err)
	}
	if _, ok := resp.(error); !ok {
		t.Errorf("Propose(bogus) response = %#v, want the state machine's error", resp)
	}

	// The leadership term is the term the state machine sees on entries.
	if got, want := fsm.term(), l.Term; got != want {
		t.Errorf("Command.Term = %d, Leadership().Term = %d; want equal", got, want)
	}
	if got, want := n.Term(), l.Term; got != want {
		t.Errorf("Term() = %d, want %d", got, want)
	}
	if !n.IsLeader() {
		t.Error("IsLeader() = false, want true")
	}
	st := n.Stats()
	if st.State != "Leader" || st.LeaderID != "n1" || st.LeaderAddr != n.Addr() || st.Term != l.Term {
		t.Errorf("Stats() = %+v, want leader n1 at %s in term %d", st, n.Addr(), l.Term)
	}
	if st.AppliedIndex < 20+1+1 || st.CommitIndex < st.AppliedIndex {
		t.Errorf("Stats() = %+v, want applied index >= %d and commit index >= applied", st, 20+1+1)
	}
	if id, addr := n.Leader(); id != "n1" || addr != n.Addr() {
		t.Errorf("Leader() = %q, %q, want %q, %q", id, addr, "n1", n.Addr())
	}
	if err := n.VerifyLeader(context.Background()); err != nil {
		t.Errorf("VerifyLeader: %v", err)
	}

	mu.Lock()
	defer mu.Unlock()
	// One call per entry: the 21 lone proposals have one each, the
	// concurrent ones share entries (group commit).
	if lo, hi := 20+1+1, 20+workers*each+1; hookCalls < lo || hookCalls > hi {
		t.Errorf("OnApply called %d times for successful entries, want %d to %d", hookCalls, lo, hi)
	}
	if err := n.ReadIndex(context.Background()); err != nil {
		t.Errorf("ReadIndex: %v", err)
	}
	if got, want := n.AppliedIndex(), st.CommitIndex; got < want {
		t.Errorf("AppliedIndex() = %d after ReadIndex, want at least the commit index %d", got, want)
	}
	if k := n.KnownLeader(); k.ID != "n1" || k.Addr != n.Addr() {
		t.Errorf("KnownLeader() = %+v, want n1 at %s", k, n.Addr())
	}
}

func TestNode_ReopenReplaysLog(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)

	n, err := raftstore.Open(cfg, &counter{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	waitLeader(t, n)
	applyN(t, n, 10, 1)
	if err := n.Shutdown(); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}

	// Bootstrap stays set: a dir with state must not be bootstrapped again.
	fsm := &counter{}
	n = open(t, cfg, fsm)
	waitLeader(t, n)
	barrier(t, n)
	if got, restores := fsm.get(); got != 10 || restores != 0 {
		t.Errorf("after reopen counter = %d (restores %d), want 10 replayed from the log", got, restores)
	}
	applyN(t, n, 5, 11)
}

func TestNode_ReopenRestoresSnapshot(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)

	n, err := raftstore.Open(cfg, &counter{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	waitLeader(t, n)
	applyN(t, n, 10, 1)
	if err := n.Snapshot(); err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	applyN(t, n, 5, 11)
	if err := n.Shutdown(); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}

	fsm := &counter{}
	n = open(t, cfg, fsm)
	// Open restores the snapshot before it returns.
	if got, restores := fsm.get(); got != 10 || restores != 1 {
		t.Errorf("after Open counter = %d (restores %d), want 10 from one snapshot restore", got, restores)
	}
	waitLeader(t, n)
	barrier(t, n)
	if got, _ := fsm.get(); got != 15 {
		t.Errorf("after Barrier counter = %d, want 15 (snapshot + log)", got)
	}
	applyN(t, n, 5, 16)
}

func TestOpen_DataDirInUse(t *testing.T) {
	dir := t.TempDir()
	n := open(t, testConfig(t, dir), &counter{})

	_, err := raftstore.Open(testConfig(t, dir), &counter{})
	if !errors.Is(err, raftstore.ErrDataDirInUse) {
		t.Fatalf("second Open error = %v, want ErrDataDirInUse", err)
	}
	if want := "data dir " + dir + " is in use by another fenced process"; !strings.Contains(err.Error(), want) {
		t.Errorf("second Open error = %q, want it to contain %q", err, want)
	}

	if err := n.Shutdown(); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	n2 := open(t, testConfig(t, dir), &counter{})
	waitLeader(t, n2)
}

func TestNode_Shutdown(t *testing.T) {
	n := open(t, testConfig(t, t.TempDir()), &counter{})
	l := waitLeader(t, n)
	applyN(t, n, 1, 1)

	if err := n.Shutdown(); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := n.Shutdown(); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	select {
	case <-n.Done():
	default:
		t.Error("Done() is not closed after Shutdown")
	}
	select {
	case <-l.Changed:
	default:
		t.Error("Leadership().Changed is not closed after Shutdown")
	}
	if got := n.Leadership(); got.Leader || got.Term != 0 {
		t.Errorf("Leadership() after Shutdown = %+v, want not leader", got)
	}
	if n.IsLeader() {
		t.Error("IsLeader() after Shutdown = true")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := n.Propose(ctx, "inc")
	if !errors.Is(err, raftstore.ErrShutdown) || errors.Is(err, raftstore.ErrOutcomeUnknown) {
		t.Errorf("Propose after Shutdown = %v, want ErrShutdown (not proposed)", err)
	}
	if err := n.Barrier(ctx); !errors.Is(err, raftstore.ErrShutdown) {
		t.Errorf("Barrier after Shutdown = %v, want ErrShutdown", err)
	}
	if err := n.VerifyLeader(ctx); !errors.Is(err, raftstore.ErrShutdown) {
		t.Errorf("VerifyLeader after Shutdown = %v, want ErrShutdown", err)
	}
	if st := n.Stats(); st.State != "Shutdown" {
		t.Errorf("Stats().State after Shutdown = %q, want Shutdown", st.State)
	}
}

// TestNode_ShutdownDuringPropose checks that Propose calls racing with Shutdown
// all return, either applied or with an error that says what happened.
func TestNode_ShutdownDuringPropose(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.ShutdownTimeout = 0
	n := open(t, cfg, &counter{})
	waitLeader(t, n)

	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				_, err := n.Propose(context.Background(), "inc")
				if err == nil {
					continue
				}
				if !errors.Is(err, raftstore.ErrShutdown) && !errors.Is(err, raftstore.ErrOutcomeUnknown) {
					t.Errorf("Propose during Shutdown = %v, want ErrShutdown or ErrOutcomeUnknown", err)
				}
				return
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	if err := n.Shutdown(); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Propose calls still blocked 10s after Shutdown")
	}
}

func TestNode_FollowerRejectsWrites(t *testing.T) {
	// Without Bootstrap a fresh node has no cluster: it never leads.
	cfg := testConfig(t, t.TempDir())
	cfg.Bootstrap = false
	n := open(t, cfg, &counter{})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := n.Propose(ctx, "inc")
	if !errors.Is(err, fence.ErrNotLeader) || errors.Is(err, raftstore.ErrOutcomeUnknown) {
		t.Errorf("Propose on a follower = %v, want fence.ErrNotLeader (not applied)", err)
	}
	if err := n.Barrier(ctx); !errors.Is(err, fence.ErrNotLeader) {
		t.Errorf("Barrier on a follower = %v, want fence.ErrNotLeader", err)
	}
	if err := n.VerifyLeader(ctx); !errors.Is(err, fence.ErrNotLeader) {
		t.Errorf("VerifyLeader on a follower = %v, want fence.ErrNotLeader", err)
	}
	if n.IsLeader() || n.Leadership().Leader {
		t.Error("a node without a cluster says it leads")
	}
}

func TestNode_ProposeContext(t *testing.T) {
	n := open(t, testConfig(t, t.TempDir()), &counter{})
	waitLeader(t, n)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := n.Propose(ctx, "inc")
	if !errors.Is(err, context.Canceled) || errors.Is(err, raftstore.ErrOutcomeUnknown) {
		t.Errorf("Propose with a cancelled context = %v, want context.Canceled (not proposed)", err)
	}

	ctx, cancel = context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	_, err = n.Propose(ctx, "inc")
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, raftstore.ErrOutcomeUnknown) {
		t.Errorf("Propose with an expired deadline = %v, want context.DeadlineExceeded (not proposed)", err)
	}
}

func TestOpen_LogsThroughSlog(t *testing.T) {
	var buf syncBuffer
	cfg := testConfig(t, t.TempDir())
	cfg.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	n, err := raftstore.Open(cfg, &counter{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	waitLeader(t, n)
	if err := n.Shutdown(); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	out := buf.String()
	if !strings.Contains(out, "logger=raft") || !strings.Contains(out, "entering leader state") {
		t.Errorf("log output lacks hashicorp/raft's messages with logger=raft:\n%s", out)
	}
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of raft's
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
