package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fenced-dev/fenced/bench"
	"github.com/fenced-dev/fenced/client"
)

func newBenchCommand() *cobra.Command {
	var (
		cf           clientFlags
		workload     string
		o            bench.Options
		connections  int
		protocol     string
		serverPIDs   []int
		cpuProfile   string
		backend      string
		ackWithClaim bool
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure lock throughput and latency against a cluster",
		Long: `Run a workload against the cluster at --endpoints and print its throughput
and latency percentiles (with --json, one JSON object).

Workloads:
  lock          every client takes and releases its own lock (uncontended
                acquire → token → release cycles)
  handoff       every client takes and releases the same lock: each cycle
                hands the lock to the next waiter in FIFO order
  sessions      opens --sessions holders, each holding its own lock, keeps
                them alive for --duration and reports the server's CPU and
                RSS (bytes per session from the RSS growth)
  fenced-write  acquire → fenced kv put with the token → release
  semaphore     every client takes and releases one permit of the same
                semaphore of --capacity permits (waiting FIFO when all are
                held); checks that no more clients hold a permit at once
                than the capacity and that each slot's tokens increase
  rwlock        every client takes and releases the same read/write lock:
                a read grant in 90% of the cycles, the write grant in 10%
  limiter       every client asks one rate limiter for a permit at a time
                (Allow); with --batch N each takes N permits per round trip
  queue         every client is a worker on one shared work queue: push →
                claim (waiting, pushed by the server) → ack, one item per
                cycle; reports items/s and the claim latency, and checks
                that every claim of an item has a token above its earlier
                claims'. With --ack-with-claim (the default) each ack
                rides the next claim (ack-and-claim-next): two commands
                per item instead of three. With --batch N (up to 32) each
                worker pushes N items in one call and acks them with its
                next claim of up to N: two commands per N items
  read          every client reads one kv key (linearizable: a quorum
                round trip per read, or the leader lease with --lease-reads)

Latencies are measured on this machine's monotonic clock after --warmup.
When the endpoints are on this machine, the server processes are found
through /proc and their CPU and RSS during the measurement are reported
(or name them with --server-pid). Client and server sharing the same cores
compete for them: compare figures only within one run on one machine.

The lock, semaphore, limiter and queue names used start with bench/ (an
interrupted queue run may leave a few items in its queue); run it against a cluster that
serves other users only if a little extra load is acceptable.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Workload = bench.Workload(workload)
			o.ServerPIDs = serverPIDs
			o.SeparateAck = !ackWithClaim
			if err := o.Validate(); err != nil {
				return withExit(exitUsage, err)
			}
			if sys, ok, err := benchBackend(cmd.Context(), backend, o.Workload); ok {
				if err != nil {
					return classify(err)
				}
				defer closeWithin(cmd.Context(), sys.Close)
				return runBench(cmd, cf.json, sys, o)
			}
			eps, err := cf.validEndpoints()
			if err != nil {
				return err
			}
			if len(o.ServerPIDs) == 0 {
				o.ServerPIDs = localServerPIDs(eps)
			}
			if cpuProfile != "" {
				stop, err := startCPUProfile(cpuProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			copts, err := cf.options()
			if err != nil {
				return err
			}
			proto, err := client.ParseProtocol(protocol)
			if err != nil {
				return usageError("--protocol %q: want auto, native or connect", protocol)
			}
			copts = append(copts, client.WithProtocol(proto))
			sys, err := bench.NewFenced(eps, connections, copts...)
			if err != nil {
				return classify(err)
			}
			// An interrupted run does not wait for a server that went away
			// to answer the sessions' closes: their TTLs end them.
			defer closeWithin(cmd.Context(), sys.Close)
			if err := cf.reach(cmd.Context(), eps); err != nil {
				return err
			}
			return runBench(cmd, cf.json, sys, o)
		},
	}
	cf.register(cmd)
	f := cmd.Flags()
	f.StringVar(&backend, "backend", "fenced", "what to measure: fenced (the server at --endpoints) or a library grantor's store, postgres://USER@HOST/DB or redis://HOST:PORT/DB (lock and handoff workloads)")
	f.StringVar(&workload, "workload", string(bench.WorkloadLock), "lock, handoff, sessions, fenced-write, semaphore, rwlock, limiter, queue or read")
	f.IntVar(&o.Capacity, "capacity", 8, "the semaphore's capacity in the semaphore workload, 1–1000000")
	f.BoolVar(&ackWithClaim, "ack-with-claim", true, "queue: ack each item with the next claim, one command instead of two (false: a separate ack per item)")
	f.IntVar(&o.Batch, "batch", 0, "limiter: permits each client takes per round trip (0 or 1: one per decision), 0–10000; queue: items per call, 1–32 (each worker pushes N in one call and acks them with its next claim of up to N)")
	f.IntVar(&o.Clients, "clients", 16, "concurrent clients (sessions: how many open holders at a time), 1–10000")
	f.IntVar(&o.Sessions, "sessions", 10000, "holders the sessions workload keeps alive, 1–1000000")
	f.DurationVar(&o.Duration, "duration", 10*time.Second, "how long to measure")
	f.DurationVar(&o.Warmup, "warmup", time.Second, "how long to run before measuring")
	f.DurationVar(&o.TTL, "ttl", bench.DefaultTTL, "session TTL of every client")
	f.IntVar(&o.ValueSize, "value-size", 128, "bytes per write in fenced-write")
	f.IntVar(&connections, "connections", 1, "client connections the clients share (an application uses 1)")
	f.IntSliceVar(&serverPIDs, "server-pid", nil, "server process ids to sample (default: found from local --endpoints)")
	f.StringVar(&protocol, "protocol", "auto", "how the SDK carries its Pipeline and KeepAlive streams: auto (native when the server offers it), native or connect")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write this client's CPU profile to FILE (go tool pprof)")
	return cmd
}

// runBench runs o against sys, showing its progress on stderr, and
// prints the result (as JSON with asJSON); an interrupted run prints what
// was measured until then, marked partial, and exits as interrupted; a
// safety violation or a failed call makes it fail.
func runBench(cmd *cobra.Command, asJSON bool, sys bench.System, o bench.Options) error {
	line := newProgress(os.Stderr, asJSON)
	o.Progress = func(p bench.Progress) {
		if p.Total > 0 {
			line.update("fenced bench: %s %v/%v, %d done", p.Phase, p.Elapsed.Round(time.Second), p.Total, p.Done)
		} else {
			line.update("fenced bench: %s, %d done", p.Phase, p.Done)
		}
	}
	r, err := bench.Run(cmd.Context(), sys, o)
	line.clear()
	if err != nil && !r.Partial {
		return err
	}
	if r.Partial && !asJSON {
		fmt.Fprintf(cmd.OutOrStdout(), "interrupted: partial results, %.1fs of %v measured\n", r.DurationS, o.Duration)
	}
	if asJSON {
		if err := json.NewEncoder(cmd.OutOrStdout()).Encode(r); err != nil {
			return err
		}
	} else {
		printBench(cmd.OutOrStdout(), r)
	}
	switch {
	case r.Partial:
		return withExit(exitInterrupted, errors.New("interrupted"))
	case r.CapacityViolations > 0:
		return fmt.Errorf("%d permits were held by more clients at once than the capacity: a safety bug, please report it", r.CapacityViolations)
	case r.TokenOrderViolations > 0:
		return fmt.Errorf("%d grants came with a token not above the previous holder's: a safety bug, please report it", r.TokenOrderViolations)
	case r.Errors > 0:
		return fmt.Errorf("%d calls failed; the first: %s", r.Errors, r.FirstError)
	}
	return nil
}

// startCPUProfile starts writing a CPU profile of this process to path
// and returns the function that stops it.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// localServerPIDs returns the processes listening on those endpoints that
// are on this machine; endpoints elsewhere are skipped.
func localServerPIDs(endpoints []string) []int {
	var pids []int
	for _, ep := range endpoints {
		ep = strings.TrimPrefix(strings.TrimPrefix(ep, "http://"), "https://")
		if pid, err := bench.ListenerPID(strings.TrimSuffix(ep, "/")); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// printBench prints r for people.
func printBench(w io.Writer, r bench.Result) {
	switch r.Workload {
	case bench.WorkloadSessions:
		fmt.Fprintf(w, "fenced bench %s: %d holders opened by %d clients, held for %.1fs\n", r.Workload, r.Sessions, r.Clients, r.DurationS)
		fmt.Fprintf(w, "  opened     %d holders at %.0f/s\n", r.Cycles, r.CyclesPerS)
	case bench.WorkloadQueue:
		fmt.Fprintf(w, "fenced bench %s: %d workers on one queue, %.1fs measured\n", r.Workload, r.Clients, r.DurationS)
		fmt.Fprintf(w, "  items      %d pushed, claimed and acked (%.0f/s)\n", r.Cycles, r.CyclesPerS)
	default:
		fmt.Fprintf(w, "fenced bench %s: %d clients, %.1fs measured\n", r.Workload, r.Clients, r.DurationS)
		fmt.Fprintf(w, "  cycles     %d (%.0f/s)\n", r.Cycles, r.CyclesPerS)
	}
	what := "acquire"
	if r.Workload == bench.WorkloadQueue {
		what = "claim  "
	}
	fmt.Fprintf(w, "  %s    p50 %.2fms  p90 %.2fms  p99 %.2fms  max %.2fms\n", what, r.P50Ms, r.P90Ms, r.P99Ms, r.MaxMs)
	if r.Workload != bench.WorkloadSessions {
		fmt.Fprintf(w, "  cycle      p50 %.2fms  p99 %.2fms\n", r.CycleP50Ms, r.CycleP99Ms)
	}
	if r.Workload == bench.WorkloadSemaphore {
		fmt.Fprintf(w, "  checks     %d capacity violations, %d slot token order violations\n", r.CapacityViolations, r.TokenOrderViolations)
	}
	if r.Workload == bench.WorkloadQueue {
		fmt.Fprintf(w, "  checks     %d claim token order violations, %d redeliveries\n", r.TokenOrderViolations, r.Redeliveries)
	}
	fmt.Fprintf(w, "  errors     %d\n", r.Errors)
	if s := r.Server; s != nil {
		fmt.Fprintf(w, "  server     cpu %.0f%%  rss %.1f MiB (pids %v)", s.CPUPercent, s.RSSMiB, s.PIDs)
		if us := bench.UsPerCycle(s.CPUPercent, r.CyclesPerS); r.Workload != bench.WorkloadSessions && us > 0 {
			fmt.Fprintf(w, "  %.0f µs/cycle", us)
		}
		printSyscalls(w, r, s.ReadCalls, s.WriteCalls)
		if s.BytesPerSession != 0 {
			fmt.Fprintf(w, "  %.0f bytes/session", s.BytesPerSession)
		}
		fmt.Fprintln(w)
	}
	if c := r.Client; c != nil {
		fmt.Fprintf(w, "  client     cpu %.0f%% (this process)", c.CPUPercent)
		if us := bench.UsPerCycle(c.CPUPercent, r.CyclesPerS); r.Workload != bench.WorkloadSessions && us > 0 {
			fmt.Fprintf(w, "  %.0f µs/cycle", us)
		}
		printSyscalls(w, r, c.ReadCalls, c.WriteCalls)
		fmt.Fprintln(w)
	}
}

// printSyscalls prints a process's read and write system calls per cycle
// (none for the sessions workload, which has no cycles, or when /proc
// did not tell).
func printSyscalls(w io.Writer, r bench.Result, reads, writes int64) {
	if r.Workload != bench.WorkloadSessions && r.Cycles > 0 && reads+writes > 0 {
		fmt.Fprintf(w, "  syscalls/cycle %.2f read %.2f write", float64(reads)/float64(r.Cycles), float64(writes)/float64(r.Cycles))
	}
}

// closeWithin runs closeFn; when ctx has ended (the command was
// interrupted) it waits for it at most 300ms.
func closeWithin(ctx context.Context, closeFn func() error) {
	if ctx.Err() == nil {
		closeFn()
		return
	}
	done := make(chan struct{})
	go func() { closeFn(); close(done) }()
	select {
	case <-done:
	case <-time.After(300 * time.Millisecond):
	}
}
