package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fenced-dev/fenced/check"
)

func newCheckCommand() *cobra.Command {
	cfg := check.Config{Nodes: 3, Clients: 5, Locks: 3, Capacity: 2, Duration: 30 * time.Second, TTL: time.Second,
		Resource: "fenced", OutDir: "fenced-check", LivenessBound: 5 * time.Second}
	var faults, workloads string
	var worker check.WorkerConfig
	var isWorker bool
	var endpoints, names, workerOut string
	var seed int64
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Run the fault harness: a real cluster under faults, every operation recorded and checked",
		Long: `Start a cluster of real fenced serve processes on loopback behind per-link
TCP proxies, run client worker processes that take contended locks, write
the fenced kv under their tokens and try to act for each other's sessions
with wrong secrets, inject faults on a seeded schedule, heal, and check the
whole history: stale writes, token order, mutual exclusion,
linearizability (porcupine), lost acknowledgements, liveness after healing
and session ownership. Writes history.jsonl, summary.json, violations.json and
report.html to --out. The last line on stdout is one summary line; the exit
status is 0 only when every check passed.

It needs a test build of fenced, whose nodes have the fault hooks (a
production build refuses): go build -tags fencedfaults -o fenced ./cmd/fenced

Fault kinds: pause-client, pause-server, kill, partition, transfer, skew,
membership (or all).

Workloads (--workload): lock (the default), semaphore (permits of
--capacity; each holder writes its slot's key "sem-N/SLOT"), rwlock
(readers read, writers write), election (the leader writes under its term
token), or all; the semaphore, rw-exclusion and election checks run on the
committed history when their workload does.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if isWorker {
				worker.Endpoints, worker.Names, worker.Seed = strings.Split(endpoints, ","), strings.Split(names, ","), uint64(seed)
				return runCheckWorker(worker, workerOut)
			}
			fs, err := check.ParseFaults(faults)
			if err != nil {
				return usageError("--faults: %v", err)
			}
			if cfg.Workloads, err = check.ParseWorkloads(workloads); err != nil {
				return usageError("--workload: %v", err)
			}
			cfg.Faults, cfg.Seed = fs, seed
			if cfg.Seed == 0 {
				cfg.Seed = time.Now().UnixNano()
			}
			if cfg.Binary, err = os.Executable(); err != nil {
				return err
			}
			if err := cfg.Validate(); err != nil {
				return withExit(exitUsage, err)
			}
			line := newProgress(os.Stderr, false)
			cfg.Progress = func(p check.Progress) {
				line.update("check: %v/%v ops=%d faults=%d", p.Elapsed.Round(time.Second), p.Total, p.Ops, p.Faults)
			}
			cfg.Log = &clearingWriter{line: line, w: os.Stderr}
			res, err := check.Run(cmd.Context(), cfg)
			line.clear()
			if err != nil {
				return err
			}
			for _, v := range res.Violations {
				fmt.Fprintf(cmd.ErrOrStderr(), "violation: %s: %s\n", v.Check, v.Message)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "report: %s/report.html\n", cfg.OutDir)
			fmt.Fprintln(cmd.OutOrStdout(), res.Summary.Line())
			if len(res.Violations) > 0 {
				return withExit(exitError, nil)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Nodes, "nodes", cfg.Nodes, "cluster size: 1, 3 or 5")
	f.IntVar(&cfg.Clients, "clients", cfg.Clients, "client worker processes")
	f.IntVar(&cfg.Locks, "locks", cfg.Locks, "contended objects of each workload (each protects one kv key; a semaphore one per slot)")
	f.StringVar(&workloads, "workload", check.WorkloadLock, "primitives the workers exercise: lock,semaphore,rwlock,election,queue,latch or all")
	f.IntVar(&cfg.Capacity, "capacity", cfg.Capacity, "capacity of the semaphores of the semaphore workload")
	f.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long to run the workload under faults")
	f.Int64Var(&seed, "seed", 0, "seed of the workload and the fault schedule (0: from the clock; printed in the summary)")
	f.StringVar(&faults, "faults", "all", "fault kinds: pause-client,pause-server,kill,partition,transfer,skew,membership or all")
	f.DurationVar(&cfg.TTL, "ttl", cfg.TTL, "the TTL of the workers' sessions and TTL locks")
	f.StringVar(&cfg.Resource, "resource", cfg.Resource, "fenced, or unfenced: the kv accepts every write (a negative control: the stale-write check must fail)")
	f.BoolVar(&cfg.UnscopedKV, "unscoped-kv", false, "negative control: the kv skips the scope rule but keeps the stale check, so a live token writes any key (the scope check must fail)")
	f.BoolVar(&cfg.ResetTokens, "reset-tokens", false, "negative control: every new leader reports tokens as if it had reset the token counter (the token-order check must fail)")
	f.BoolVar(&cfg.AnyOwner, "any-owner", false, "negative control: the servers let any request act for any session, whatever its secret (the ownership check must fail)")
	f.BoolVar(&cfg.OverCapacity, "over-capacity", false, "negative control: semaphores grant one permit over their capacity (the semaphore check must fail; needs --workload semaphore)")
	f.BoolVar(&cfg.ReaderWithWriter, "reader-with-writer", false, "negative control: read/write locks admit a reader beside a writer (the rw-exclusion check must fail; needs --workload rwlock)")
	f.BoolVar(&cfg.SecondLeader, "second-leader", false, "negative control: elections make a new candidate leader while another leads (the election check must fail; needs --workload election)")
	f.BoolVar(&cfg.AckAnyToken, "ack-any-token", false, "negative control: queues accept an ack of a claimed item with any token (the queue check must fail; needs --workload queue)")
	f.BoolVar(&cfg.LatchEarly, "latch-early", false, "negative control: latches release waiters one count early (the latch check must fail; needs --workload latch)")
	f.BoolVar(&cfg.MisdeliverSignedGrants, "misdeliver-signed-grants", false, "negative control: the leader hands each grant the signed grant of the one signed before it (the signed-grant check must fail)")
	f.BoolVar(&cfg.LeaseReads, "lease-reads", false, "run every node with --lease-reads (linearizable reads on the leader lease)")
	f.BoolVar(&cfg.UncheckedLeaseReads, "unchecked-lease-reads", false, "negative control: every node serves reads on the lease whenever it believes it leads, unchecked (the linearizability check may fail after a paused leader resumes)")
	f.StringVar(&cfg.OutDir, "out", cfg.OutDir, "directory for history.jsonl, summary.json, violations.json and report.html")
	f.BoolVar(&cfg.KeepData, "keep-data", false, "keep the nodes' data dirs and logs (--out/run) after a run without violations; a failed run always keeps them")
	f.BoolVar(&cfg.Secure, "secure", false, "run the cluster with TLS (API and peer mutual TLS, certificates made in --out) and bearer-token auth")
	f.DurationVar(&cfg.LivenessBound, "liveness-bound", cfg.LivenessBound, "after healing, every client must get a grant within this")
	// Worker mode: the harness runs this binary as its client processes.
	f.BoolVar(&isWorker, "worker", false, "run as a client worker process (used by the harness)")
	f.StringVar(&worker.ID, "id", "", "worker: process id")
	f.StringVar(&endpoints, "endpoints", "", "worker: servers")
	f.StringVar(&names, "names", "", "worker: lock names")
	f.StringVar(&workerOut, "worker-out", "", "worker: history file")
	f.DurationVar(&worker.TTL, "worker-ttl", time.Second, "worker: TTL")
	f.IntVar(&worker.Capacity, "worker-capacity", 2, "worker: semaphore capacity")
	f.StringVar(&worker.CAFile, "worker-ca", "", "worker: CA of the servers (TLS)")
	f.StringVar(&worker.TokenFile, "worker-token-file", "", "worker: bearer token file")
	for _, name := range []string{"worker", "id", "endpoints", "names", "worker-out", "worker-ttl", "worker-capacity", "worker-ca", "worker-token-file"} {
		f.MarkHidden(name)
	}
	return cmd
}

// runCheckWorker runs one worker until SIGTERM.
func runCheckWorker(cfg check.WorkerConfig, out string) error {
	f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	cfg.Out = f
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return check.RunWorker(ctx, cfg)
}

// clearingWriter clears the progress line before each write, so that
// log lines do not land in the middle of it.
type clearingWriter struct {
	line *progressLine
	w    io.Writer
}

func (c *clearingWriter) Write(p []byte) (int, error) {
	c.line.clear()
	return c.w.Write(p)
}
