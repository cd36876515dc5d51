// Command compare runs the side-by-side comparison of fenced with etcd,
// ZooKeeper and Redis: it starts each system itself on loopback ports with
// fresh data, drives it through the bench package's workloads, and writes
// BENCHMARKS.md, an SVG chart and the raw per-run results.
//
//	cd bench/compare && ./setup.sh && go run .
//
// It lives in a module of its own so that the main module never depends on
// the etcd, ZooKeeper or Redis clients.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// settings are the runner's flags.
type settings struct {
	Duration  time.Duration `json:"duration_ns"`
	Warmup    time.Duration `json:"warmup_ns"`
	Runs      int           `json:"runs"`
	TTL       time.Duration `json:"ttl_ns"`
	Systems   string        `json:"systems,omitempty"`
	Workloads string        `json:"workloads,omitempty"`
	Out       string        `json:"-"`
	SVG       string        `json:"-"`
	JSON      string        `json:"-"`
	Root      string        `json:"-"`
	// Rerender rewrites the report and chart from the raw results in
	// JSON without measuring anything.
	Rerender bool `json:"-"`
}

func main() {
	var s settings
	flag.DurationVar(&s.Duration, "duration", 10*time.Second, "measured time of each run of each workload")
	flag.DurationVar(&s.Warmup, "warmup", 2*time.Second, "unmeasured warm-up before each measurement (cycle workloads)")
	flag.IntVar(&s.Runs, "runs", 3, "repetitions of the whole matrix; the report shows the median of each figure")
	flag.DurationVar(&s.TTL, "ttl", 10*time.Second, "session TTL of every holder (etcd lease, ZooKeeper session timeout, Redis PX, fenced session)")
	flag.StringVar(&s.Systems, "systems", "", "comma-separated systems to run (default all): "+targetNames())
	flag.StringVar(&s.Workloads, "workloads", "", "comma-separated workloads or case ids to run (default all)")
	flag.StringVar(&s.Out, "out", "../../BENCHMARKS.md", "the report to write")
	flag.StringVar(&s.SVG, "svg", "../../docs/benchmarks.svg", "the chart to write")
	flag.StringVar(&s.JSON, "json", "results.json", "the raw per-run results to write")
	flag.StringVar(&s.Root, "root", "../..", "the fenced main module, whose cmd/fenced is built and measured")
	flag.BoolVar(&s.Rerender, "rerender", false, "only rewrite the report and chart from the raw results in --json (no measurement)")
	flag.Parse()
	run := run
	if s.Rerender {
		run = rerender
	}
	if err := run(s); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func run(s settings) error {
	if s.Runs < 1 || s.Runs > 100 {
		return fmt.Errorf("--runs %d: want 1–100", s.Runs)
	}
	if s.Duration <= 0 || s.Warmup < 0 || s.TTL < time.Second {
		return fmt.Errorf("--duration must be positive, --warmup not negative, --ttl at least 1s")
	}
	cases, err := selectMatrix(s.Workloads, s.Systems)
	if err != nil {
		return err
	}
	if err := checkInstalled(cases); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	tmp, err := os.MkdirTemp("", "fenced-compare-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	root, err := filepath.Abs(s.Root)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "compare: building fenced from %s\n", root)
	bin, err := buildFenced(root, tmp)
	if err != nil {
		return err
	}
	envInfo := collectEnvironment(root, tmp)
	measurements, err := runMatrix(ctx, env{fencedBin: bin, tmp: tmp}, cases, s)
	if err != nil {
		return err
	}
	raw := rawResults{Generated: time.Now().UTC(), Settings: s, Environment: envInfo, Cases: cases, Measurements: measurements}
	if err := writeJSON(s.JSON, raw); err != nil {
		return err
	}
	return render(raw, s)
}

// rerender rewrites the report and chart from the raw results file.
func rerender(s settings) error {
	b, err := os.ReadFile(s.JSON)
	if err != nil {
		return err
	}
	var raw rawResults
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("%s: %w", s.JSON, err)
	}
	return render(raw, s)
}

// render writes the chart and the report of raw.
func render(raw rawResults, s settings) error {
	sums := summarize(raw.Cases, raw.Measurements)
	if err := writeSVG(s.SVG, raw.Cases, sums); err != nil {
		return err
	}
	if err := writeReport(s.Out, s.SVG, raw, sums); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "compare: wrote %s, %s and %s\n", s.Out, s.SVG, s.JSON)
	return nil
}

// checkInstalled fails, naming the apt-get command, when a server the
// selected cases need is missing.
func checkInstalled(cases []benchCase) error {
	need := map[string][]string{
		"etcd":      {etcdBin},
		"zookeeper": {javaBin, zkJar},
		"redis":     {redisBin},
		"pggrant":   {filepath.Join(postgresBinDir, "postgres"), filepath.Join(postgresBinDir, "initdb")},
	}
	for _, c := range cases {
		for _, name := range c.Targets {
			t, _ := targetByName(name)
			for _, path := range need[t.Kind] {
				if _, err := lookBin(path); err != nil {
					return fmt.Errorf("%s needs %w", t.Name, err)
				}
			}
		}
	}
	return nil
}
