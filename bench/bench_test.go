package bench_test

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/bench"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/testserver"
)

func TestOptions_Validate(t *testing.T) {
	ok := bench.Options{Workload: bench.WorkloadLock, Clients: 4, Duration: time.Second}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid options refused: %v", err)
	}
	for _, tc := range []struct {
		change func(*bench.Options)
		want   string
	}{
		{func(o *bench.Options) { o.Workload = "spin" }, "unknown workload"},
		{func(o *bench.Options) { o.Clients = 0 }, "clients 0 out of range"},
		{func(o *bench.Options) { o.Clients = 10001 }, "clients 10001 out of range"},
		{func(o *bench.Options) { o.Workload, o.Sessions = bench.WorkloadSessions, 0 }, "sessions 0 out of range"},
		{func(o *bench.Options) { o.Duration = 0 }, "duration 0s out of range"},
		{func(o *bench.Options) { o.Warmup = -time.Second }, "warm-up -1s out of range"},
		{func(o *bench.Options) { o.TTL = -time.Second }, "ttl -1s out of range"},
		{func(o *bench.Options) { o.ValueSize = 2 << 20 }, "value size 2097152 out of range"},
		{func(o *bench.Options) { o.ServerPIDs = []int{0} }, "server pid 0 is not a process id"},
		{func(o *bench.Options) { o.Workload, o.Capacity = bench.WorkloadSemaphore, 1000001 }, "capacity 1000001 out of range"},
	} {
		o := ok
		tc.change(&o)
		err := o.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want an error mentioning %q", o, err, tc.want)
		}
		if _, err := bench.Run(context.Background(), nil, o); err == nil {
			t.Errorf("Run accepted invalid options %+v", o)
		}
	}
}

func TestListenerPID_FindsThisProcess(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pid, err := bench.ListenerPID(ln.Addr().String())
	if err != nil || pid != os.Getpid() {
		t.Fatalf("ListenerPID(%s) = %d, %v; want this process %d", ln.Addr(), pid, err, os.Getpid())
	}
	ln.Close()
	if _, err := bench.ListenerPID(ln.Addr().String()); err == nil {
		t.Fatalf("ListenerPID found a process on closed %s", ln.Addr())
	}
	if _, err := bench.ListenerPID("192.0.2.1:80"); err == nil {
		t.Fatal("ListenerPID accepted an address not on this machine")
	}
}

// TestRun_Handoff runs the contended workload in process: every client
// takes the same lock, so each grant must carry a token above the one
// before it.
func TestRun_Handoff(t *testing.T) {
	srv := testserver.Start(t)
	sys, err := bench.NewFenced([]string{srv.Addr()}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	var mu sync.Mutex
	var progress []bench.Progress
	r, err := bench.Run(context.Background(), sys, bench.Options{
		Workload: bench.WorkloadHandoff, Clients: 4, Duration: 2500 * time.Millisecond, Warmup: 100 * time.Millisecond,
		ServerPIDs: []int{os.Getpid()},
		Progress:   func(p bench.Progress) { mu.Lock(); progress = append(progress, p); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(progress) == 0 {
		t.Fatal("no progress reported in a 2.5s measurement")
	}
	last := progress[len(progress)-1]
	if last.Phase != "measuring" || last.Total != 2500*time.Millisecond || last.Done <= 0 || last.Done > r.Cycles+int64(4) {
		t.Fatalf("last progress %+v: want the measuring phase, its total, and cycles done so far (the run counted %d)", last, r.Cycles)
	}
	if r.Cycles == 0 || r.Errors != 0 || r.TokenOrderViolations != 0 {
		t.Fatalf("handoff result %+v: want cycles, no errors, no token order violations", r)
	}
	if r.Server == nil || r.Server.CPUPercent <= 0 || r.Server.RSSMiB <= 0 {
		t.Fatalf("server usage %+v: want CPU and RSS of this process", r.Server)
	}
}

// TestRun_Semaphore runs the semaphore workload in process: 8 clients on
// a semaphore of capacity 3, with no capacity or per-slot token order
// violation.
func TestRun_Semaphore(t *testing.T) {
	srv := testserver.Start(t)
	sys, err := bench.NewFenced([]string{srv.Addr()}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	r, err := bench.Run(context.Background(), sys, bench.Options{
		Workload: bench.WorkloadSemaphore, Clients: 8, Capacity: 3, Duration: time.Second, Warmup: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Cycles == 0 || r.Errors != 0 || r.TokenOrderViolations != 0 || r.CapacityViolations != 0 {
		t.Fatalf("semaphore result %+v: want cycles, no errors, no violations", r)
	}
}

// TestRun_LimiterProgressAndPartial interrupts the limiter workload (the
// progress and partial results live in the measurement every cycle
// workload shares): progress comes during the measurement, and a run
// interrupted then returns what it measured, marked partial, with the
// interruption; one interrupted during the warm-up returns no result.
func TestRun_LimiterProgressAndPartial(t *testing.T) {
	srv := testserver.Start(t)
	sys, err := bench.NewFenced([]string{srv.Addr()}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var once sync.Once
	var mu sync.Mutex
	var measured []bench.Progress
	r, err := bench.Run(ctx, sys, bench.Options{
		Workload: bench.WorkloadLimiter, Clients: 4, Duration: time.Minute, Warmup: 100 * time.Millisecond,
		Progress: func(p bench.Progress) {
			if p.Phase == "measuring" && p.Done > 0 {
				mu.Lock()
				measured = append(measured, p)
				mu.Unlock()
				once.Do(cancel)
			}
		},
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: err %v, want context.Canceled", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(measured) == 0 || measured[0].Total != time.Minute {
		t.Fatalf("progress %+v: want the measuring phase with its total", measured)
	}
	if !r.Partial || r.Cycles == 0 || r.DurationS <= 0 || r.DurationS > 50 {
		t.Fatalf("interrupted result %+v: want a partial result with the cycles of the time measured", r)
	}

	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	r, err = bench.Run(ctx2, sys, bench.Options{Workload: bench.WorkloadLimiter, Clients: 2, Duration: time.Second, Warmup: time.Minute})
	if !errors.Is(err, context.Canceled) || r.Partial || r.Cycles != 0 {
		t.Fatalf("run interrupted in its warm-up: %+v, %v; want no result and context.Canceled", r, err)
	}
}

// TestRun_Queue runs the queue workload in process, over one connection
// and over several, with each ack riding the next claim (the default) and
// with separate acks: every item pushed is claimed and acked, with no
// failed call, no redelivery and no claim token out of order.
func TestRun_Queue(t *testing.T) {
	srv := testserver.Start(t)
	for i, conns := range []int{1, 3, 1, 3} {
		sys, err := bench.NewFenced([]string{srv.Addr()}, conns)
		if err != nil {
			t.Fatal(err)
		}
		r, err := bench.Run(context.Background(), sys, bench.Options{
			Workload: bench.WorkloadQueue, Clients: 6, Duration: time.Second, Warmup: 100 * time.Millisecond, SeparateAck: i >= 2,
		})
		sys.Close()
		if err != nil {
			t.Fatal(err)
		}
		if r.Cycles == 0 || r.Errors != 0 || r.TokenOrderViolations != 0 || r.Redeliveries != 0 {
			t.Fatalf("%d connections: queue result %+v: want items, no errors, no redeliveries, no violations", conns, r)
		}
		// Each claim is part of its cycle, so each percentile of the
		// claims is at most the cycles'.
		if r.P50Ms <= 0 || r.P50Ms > r.CycleP50Ms || r.P99Ms > r.CycleP99Ms {
			t.Fatalf("%d connections: claim p50 %v p99 %v against cycle p50 %v p99 %v: a claim is part of its cycle", conns, r.P50Ms, r.P99Ms, r.CycleP50Ms, r.CycleP99Ms)
		}
	}
}

// TestOpenHolders opens holders in process: each must hold its own lock on
// the server, in a session of its own, until Close ends them all.
func TestOpenHolders(t *testing.T) {
	srv := testserver.Start(t)
	sys, err := bench.NewFenced([]string{srv.Addr()}, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	ctx := context.Background()
	h, err := bench.OpenHolders(ctx, sys, bench.Options{Sessions: 40, Clients: 8, TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if h.Len() != 40 || h.Setup() <= 0 {
		t.Errorf("Len() = %d, Setup() = %v; want 40 holders and a set-up time", h.Len(), h.Setup())
	}
	c, err := client.New([]string{srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := c.Status(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	held, owners := 0, map[uint64]bool{}
	for _, l := range st.Locks {
		if l.Holder != nil {
			held++
			owners[l.Holder.Session] = true
		}
	}
	if held != 40 || len(owners) != 40 || len(st.Sessions) != 40 {
		t.Errorf("server has %d locks held by %d sessions, %d sessions; want 40 each", held, len(owners), len(st.Sessions))
	}
	h.Close(ctx)
	if st, err = c.Status(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if len(st.Sessions) != 0 {
		t.Errorf("%d sessions left after Close", len(st.Sessions))
	}
	if _, err := bench.OpenHolders(ctx, sys, bench.Options{Sessions: 0, Clients: 8}); err == nil {
		t.Error("OpenHolders accepted 0 sessions")
	}
}
