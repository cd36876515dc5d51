package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/fenced-dev/fenced/bench"
)

// summary is the median over runs of each figure of one case on one
// target. Each figure's median is taken on its own, so one row's figures
// may come from different runs.
type summary struct {
	Case   string
	Target string
	// Runs is the number of measurements that produced figures; Failed
	// those that did not.
	Runs, Failed int
	CyclesPerS   float64
	P50Ms        float64
	P99Ms        float64
	CycleP99Ms   float64
	CPUPercent   float64
	// CPUUsPerCycle is the server processes' CPU time per cycle in
	// microseconds (CPU over wall time over cycles per second, per run).
	CPUUsPerCycle float64
	// ClientUsPerCycle is the benchmark process's own CPU time per cycle
	// in microseconds: the system's client library, which runs in it
	// (one system at a time), and the workload's bookkeeping, the same for
	// every system (getrusage, per run).
	ClientUsPerCycle float64
	RSSMiB           float64
	BytesPerSess     float64
	// Errors and TokenOrderViolations are summed over runs.
	Errors               int64
	TokenOrderViolations int64
	// FirstError is the first failure or failed call seen.
	FirstError string
	// FailoverMs is the median over runs of each run's median failover
	// (election-failover), FailoverMinMs and FailoverMaxMs the extremes
	// of single failovers, and Failovers their number.
	FailoverMs, FailoverMinMs, FailoverMaxMs float64
	Failovers                                int
	// SlowFailovers counts single failovers over twice the election TTL.
	SlowFailovers int
}

// summaryKey identifies a summary.
type summaryKey struct{ Case, Target string }

// summarize groups measurements by case and target and takes medians.
func summarize(cases []benchCase, ms []measurement) map[summaryKey]summary {
	out := map[summaryKey]summary{}
	for _, c := range cases {
		for _, t := range c.Targets {
			s := summary{Case: c.ID, Target: t}
			var cyc, p50, p99, cp99, cpu, cpc, clc, rss, bps []float64
			var fo []*failoverResult
			for _, m := range ms {
				if m.Case != c.ID || m.Target != t {
					continue
				}
				if m.Error != "" && s.FirstError == "" {
					s.FirstError = firstLine(m.Error)
				}
				if c.Workload == workloadElection {
					if m.Failover == nil || m.Error != "" {
						s.Failed++
						continue
					}
					s.Runs++
					s.TokenOrderViolations += m.Failover.TokenOrderViolations
					fo = append(fo, m.Failover)
					continue
				}
				if m.Result == nil || m.Error != "" {
					s.Failed++
					continue
				}
				r := m.Result
				s.Runs++
				s.Errors += r.Errors
				s.TokenOrderViolations += r.TokenOrderViolations
				if r.FirstError != "" && s.FirstError == "" {
					s.FirstError = r.FirstError
				}
				cyc, p50, p99, cp99 = append(cyc, r.CyclesPerS), append(p50, r.P50Ms), append(p99, r.P99Ms), append(cp99, r.CycleP99Ms)
				if r.Server != nil {
					cpu, rss = append(cpu, r.Server.CPUPercent), append(rss, r.Server.RSSMiB)
					if r.CyclesPerS > 0 {
						cpc = append(cpc, r.Server.CPUPercent/100*1e6/r.CyclesPerS)
					}
					if r.Server.BytesPerSession != 0 {
						bps = append(bps, r.Server.BytesPerSession)
					}
				}
				if r.Client != nil && r.CyclesPerS > 0 {
					clc = append(clc, bench.UsPerCycle(r.Client.CPUPercent, r.CyclesPerS))
				}
			}
			s.CyclesPerS, s.P50Ms, s.P99Ms, s.CycleP99Ms = median(cyc), median(p50), median(p99), median(cp99)
			s.CPUPercent, s.CPUUsPerCycle, s.RSSMiB, s.BytesPerSess = median(cpu), median(cpc), median(rss), median(bps)
			s.ClientUsPerCycle = median(clc)
			s.FailoverMs, s.FailoverMinMs, s.FailoverMaxMs, s.Failovers = summarizeFailover(fo)
			for _, f := range fo {
				for _, ms := range f.FailoverMs {
					if ms > 2*f.TTLMs {
						s.SlowFailovers++
					}
				}
			}
			out[summaryKey{c.ID, t}] = s
		}
	}
	return out
}

// median of xs (the mean of the middle two for an even count); 0 for
// none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// rawResults is the JSON file of every measurement.
type rawResults struct {
	Generated    time.Time     `json:"generated"`
	Settings     settings      `json:"settings"`
	Environment  environment   `json:"environment"`
	Cases        []benchCase   `json:"cases"`
	Measurements []measurement `json:"measurements"`
	// Invocations are the runs whose measurements a merged file (--keep,
	// --merge) holds; empty for a file of one run.
	Invocations []invocation `json:"invocations,omitempty"`
}

// writeJSON writes v, indented, to path (creating its directory).
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(path, append(b, '\n'))
}

// writeFile writes b to path, creating its directory.
func writeFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
