// Command compare runs the side-by-side comparison of fenced with etcd,
// ZooKeeper and Redis: it starts each system itself on loopback ports with
// fresh data, drives it through the bench package's workloads, and writes
// BENCHMARKS.md, an SVG chart and the raw per-run results.
//
//	cd bench/compare && ./setup.sh && go run .
//
// --workloads picks cases (semaphore-64, rwlock-16, election-failover,
// ...), and --keep keeps the other cases of results.json, so that the
// report shows them beside the ones just measured. The election-failover
// case runs this program as `compare candidate`, one process per
// candidate, and kills the leading one.
//
// It lives in a module of its own so that the main module never depends on
// the etcd, ZooKeeper or Redis clients.
package main

import (
	"context"
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
	// ElectionTTL is the session TTL of the election-failover case.
	ElectionTTL time.Duration `json:"election_ttl_ns,omitempty"`
	Out         string        `json:"-"`
	SVG         string        `json:"-"`
	JSON        string        `json:"-"`
	Root        string        `json:"-"`
	// Rerender rewrites the report and chart from the raw results in
	// JSON without measuring anything.
	Rerender bool `json:"-"`
	// Keep keeps, in the results written to JSON, the cases of the file
	// already there that this invocation does not measure.
	Keep bool `json:"keep,omitempty"`
	// Merge, with Rerender, is another invocation's results file whose
	// cases are merged into JSON's as Keep would have.
	Merge string `json:"-"`
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "candidate" {
		if err := candidateMain(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "compare candidate:", err)
			os.Exit(1)
		}
		return
	}
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
	flag.DurationVar(&s.ElectionTTL, "election-ttl", 2*time.Second, "session TTL of the election-failover candidates (2s is the shortest lease etcd grants with its default Raft timings)")
	flag.BoolVar(&s.Keep, "keep", false, "keep the cases of the existing --json file that this invocation does not measure (the report shows both)")
	flag.StringVar(&s.Merge, "merge", "", "with --rerender: merge the cases of this results file (another invocation's --json) into --json's, as --keep would, and rewrite all three files")
	flag.Parse()
	run := run
	if s.Rerender {
		run = rerender
	} else if s.Merge != "" {
		fmt.Fprintln(os.Stderr, "compare: --merge needs --rerender")
		os.Exit(2)
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
	if s.Duration <= 0 || s.Warmup < 0 || s.TTL < time.Second || s.ElectionTTL < time.Second {
		return fmt.Errorf("--duration must be positive, --warmup not negative, --ttl and --election-ttl at least 1s")
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
	if s.Keep {
		older, err := readRaw(s.JSON, true)
		if err != nil {
			return err
		}
		raw = mergeRaw(older, raw)
	}
	if err := writeJSON(s.JSON, raw); err != nil {
		return err
	}
	return render(raw, s)
}

// rerender rewrites the report and chart from the raw results file.
func rerender(s settings) error {
	raw, err := readRaw(s.JSON, false)
	if err != nil {
		return err
	}
	if s.Merge != "" {
		newer, err := readRaw(s.Merge, false)
		if err != nil {
			return err
		}
		raw = mergeRaw(raw, newer)
		if err := writeJSON(s.JSON, raw); err != nil {
			return err
		}
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
		"etcd":       {etcdBin},
		"zookeeper":  {javaBin, zkJar},
		"redis":      {redisBin},
		"redisgrant": {redisBin},
		"pggrant":    {filepath.Join(postgresBinDir, "postgres"), filepath.Join(postgresBinDir, "initdb")},
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

// newFlagSet returns a flag set for a subcommand that exits on -h.
func newFlagSet(name string) *flag.FlagSet {
	return flag.NewFlagSet(name, flag.ExitOnError)
}
