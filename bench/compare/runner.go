package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/fenced-dev/fenced/bench"
)

// measurement is one run of one case against one target, on a server
// started fresh for it.
type measurement struct {
	Run    int    `json:"run"`
	Case   string `json:"case"`
	Target string `json:"target"`
	// StartupS is how long the server took to start and become ready.
	StartupS float64 `json:"startup_s"`
	// Load is the machine's CPU use over the whole bench.Run (set-up,
	// warm-up and measurement): clients, servers and everything else.
	Load   *machineLoad  `json:"load,omitempty"`
	Result *bench.Result `json:"result,omitempty"`
	// Failover is the election-failover case's figures.
	Failover *failoverResult `json:"failover,omitempty"`
	// Roles splits the server CPU by Raft role (multi-node targets).
	Roles *roleCPU `json:"roles,omitempty"`
	Error string   `json:"error,omitempty"`
}

// runMatrix runs every case against each of its targets, the whole matrix
// once per run: run 1 of everything, then run 2, and so on, so that slow
// drifts of a shared machine spread over every system. Within a case the
// order of the targets rotates from run to run. Every measurement gets a
// freshly started server with an empty data directory, stopped right
// after. A failed measurement is recorded and the matrix goes on.
func runMatrix(ctx context.Context, e env, cases []benchCase, s settings) ([]measurement, error) {
	var out []measurement
	total, done := 0, 0
	for _, c := range cases {
		total += len(c.Targets) * s.Runs
	}
	for r := 1; r <= s.Runs; r++ {
		for _, c := range cases {
			for i := range c.Targets {
				name := c.Targets[(i+r-1)%len(c.Targets)]
				if err := ctx.Err(); err != nil {
					return nil, fmt.Errorf("interrupted: %w", err)
				}
				m := measure(ctx, e, c, name, r, s)
				done++
				out = append(out, m)
				fmt.Fprintf(os.Stderr, "[%d/%d] %s\n", done, total, progressLine(m))
			}
		}
	}
	return out, ctx.Err()
}

// measure starts the target, runs the case once and stops the target.
func measure(ctx context.Context, e env, c benchCase, name string, run int, s settings) measurement {
	m := measurement{Run: run, Case: c.ID, Target: name}
	t, _ := targetByName(name)
	start := time.Now()
	cl, err := launch(e, t)
	if err != nil {
		m.Error = err.Error()
		return m
	}
	defer cl.stop()
	m.StartupS = time.Since(start).Seconds()
	sys, err := cl.system(c.PerLocker, c.Clients)
	if err != nil {
		m.Error = err.Error()
		return m
	}
	defer sys.Close()

	if c.Workload == workloadElection {
		before := sampleLoad(cl.pids())
		f, err := measureFailover(ctx, t.Kind, cl.endpoints, c.Failovers, s.ElectionTTL)
		load := loadSince(before, cl.pids())
		m.Load = &load
		if err != nil {
			m.Error = err.Error()
		}
		if f != nil && len(f.FailoverMs) > 0 {
			m.Failover = f
		}
		return m
	}
	limit := s.Warmup + s.Duration + 3*time.Minute
	if c.Workload == bench.WorkloadSessions {
		limit += 15 * time.Minute
	}
	rctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	opts := bench.Options{
		Workload:   c.Workload,
		Clients:    c.Clients,
		Sessions:   c.Sessions,
		Capacity:   c.Capacity,
		Batch:      c.batchFor(name),
		Duration:   s.Duration,
		Warmup:     s.Warmup,
		TTL:        s.TTL,
		ServerPIDs: cl.pids(),
	}
	leader := cl.leaderIndex()
	before := sampleLoad(opts.ServerPIDs)
	res, err := runBounded(rctx, sys, opts, limit, cl)
	load := loadSince(before, opts.ServerPIDs)
	m.Load = &load
	m.Roles = rolesOf(leader, cl.leaderIndex(), &res)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("not finished within %v: %w", limit, err)
		}
		m.Error = err.Error()
		if res.Cycles == 0 && res.Errors == 0 {
			return m
		}
	}
	res.System = name
	m.Result = &res
	return m
}

// progressLine is a compact account of one measurement.
func progressLine(m measurement) string {
	head := fmt.Sprintf("run %d %-15s %-9s", m.Run, m.Case, m.Target)
	if f := m.Failover; f != nil {
		line := fmt.Sprintf("%s failover median %.0f ms over %d kills %v", head, f.MedianMs, len(f.FailoverMs), f.FailoverMs)
		if m.Error != "" {
			line += "  FAILED: " + firstLine(m.Error)
		}
		return line
	}
	if m.Result == nil {
		return head + " FAILED: " + firstLine(m.Error)
	}
	r := m.Result
	var line string
	if r.Workload == bench.WorkloadSessions {
		line = fmt.Sprintf("%s %d holders opened at %.0f/s", head, r.Cycles, r.CyclesPerS)
	} else {
		line = fmt.Sprintf("%s %8.0f cycles/s  p50 %6.2f ms  p99 %7.2f ms", head, r.CyclesPerS, r.P50Ms, r.P99Ms)
	}
	if r.Server != nil {
		line += fmt.Sprintf("  server %.0f%% CPU %.0f MiB", r.Server.CPUPercent, r.Server.RSSMiB)
	}
	if r.Client != nil {
		line += fmt.Sprintf("  client %.0f%% CPU", r.Client.CPUPercent)
	}
	if m.Load != nil {
		line += fmt.Sprintf("  (others %.0f%% CPU)", m.Load.OthersPct)
	}
	if r.Errors > 0 {
		line += fmt.Sprintf("  errors %d (%s)", r.Errors, firstLine(r.FirstError))
	}
	if m.Error != "" {
		line += "  FAILED: " + firstLine(m.Error)
	}
	return line
}

func firstLine(s string) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i]
		}
	}
	return s
}

// runBounded runs bench.Run but gives up on it when it has not returned
// limit plus a minute after it started: a call that ignores its context
// (a release, which the workload deliberately does not cut short, against
// a server that stopped answering) must not hang the whole matrix. It then
// stops the cluster, which fails whatever is still waiting on it, and
// waits a little more before abandoning the run.
func runBounded(ctx context.Context, sys bench.System, o bench.Options, limit time.Duration, cl *cluster) (bench.Result, error) {
	type outcome struct {
		res bench.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := bench.Run(ctx, sys, o)
		done <- outcome{res, err}
	}()
	select {
	case o := <-done:
		return o.res, o.err
	case <-time.After(limit + time.Minute):
	}
	cl.stop()
	select {
	case o := <-done:
		return bench.Result{}, fmt.Errorf("hung past %v; the servers were stopped (then: %v)", limit+time.Minute, o.err)
	case <-time.After(30 * time.Second):
		return bench.Result{}, fmt.Errorf("hung past %v and did not end after the servers were stopped; abandoned", limit+time.Minute)
	}
}
