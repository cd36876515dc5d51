package check

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fenced-dev/fenced/check/checker"
	"github.com/fenced-dev/fenced/check/history"
	"github.com/fenced-dev/fenced/check/report"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/launch"
)

// Config configures a run of the harness.
type Config struct {
	// Binary is the fenced binary to run (servers and workers): a test
	// build (go build -tags fencedfaults; see FaultsBuildTag).
	Binary string
	// Nodes is the cluster size: 1, 3 or 5.
	Nodes int
	// Clients is the number of worker processes.
	Clients int
	// Locks is the number of contended objects of each workload (each
	// protects one kv key; a semaphore, one per slot).
	Locks int
	// Workloads are the primitives the workers exercise (workload.go):
	// some of lock, semaphore, rwlock, election. Empty means lock.
	Workloads []string
	// Capacity is the capacity of the semaphores of the semaphore
	// workload.
	Capacity int
	// Duration is how long the workload runs with faults.
	Duration time.Duration
	// Seed seeds the workers and the fault schedule.
	Seed int64
	// Faults are the enabled fault kinds.
	Faults []string
	// TTL is the TTL of the workers' sessions and TTL locks.
	TTL time.Duration
	// Resource is "fenced" (the kv checks tokens) or "unfenced" (the kv
	// accepts every write: the stale-write checker's negative control).
	Resource string
	// UnscopedKV makes every node's kv skip the scope rule but keep the
	// stale-token check (the scope checker's negative control: the
	// workers' cross-scope writes with live tokens are accepted).
	UnscopedKV bool
	// ResetTokens makes every new leader report tokens as if it had reset
	// the token counter (the token-order checker's negative control).
	ResetTokens bool
	// AnyOwner makes every node let any request act for any session,
	// whatever secret it presents (the ownership checker's negative
	// control: the workers' attacks on each other's sessions succeed).
	AnyOwner bool
	// OverCapacity makes every node's semaphores grant one permit more
	// than their capacity (the semaphore checker's negative control;
	// needs the semaphore workload).
	OverCapacity bool
	// ReaderWithWriter makes every node's read/write locks admit a reader
	// beside a writer (the rw-exclusion checker's negative control; needs
	// the rwlock workload).
	ReaderWithWriter bool
	// SecondLeader makes every node's elections make a new candidate
	// leader while another leads (the election checker's negative
	// control; needs the election workload).
	SecondLeader bool
	// AckAnyToken makes every node's queues accept an ack of a claimed
	// item with any token (the queue checker's negative control; needs
	// the queue workload).
	AckAnyToken bool
	// LatchEarly makes every node's latches release a generation's
	// waiters one count early (the latch checker's negative control;
	// needs the latch workload).
	LatchEarly bool
	// MisdeliverSignedGrants makes every node's leader hand each grant the
	// signed grant of the one signed before it (the signed-grant checker's
	// negative control).
	MisdeliverSignedGrants bool
	// LeaseReads runs every node with --lease-reads: linearizable reads
	// on the leader lease instead of a quorum round trip.
	LeaseReads bool
	// UncheckedLeaseReads runs every node with --lease-reads and serves
	// every read on the lease whenever the node believes it leads, without
	// checking the lease (the linearizability checker's negative control
	// for lease reads: a paused leader that resumes may answer stale).
	UncheckedLeaseReads bool
	// OutDir receives the history, the summary and the report.
	OutDir string
	// LivenessBound is how soon after healing every live client must get a
	// grant.
	LivenessBound time.Duration
	// Secure runs the cluster with TLS on every API and mutual TLS on the
	// peer ports (a CA and node certificates made in OutDir/run/certs) and
	// with bearer-token authentication (OutDir/run/auth.jsonl): the
	// workers use an identity that may acquire, read and write the kv, the
	// harness an admin identity for membership changes and final reads.
	Secure bool
	// Log receives progress; nil means stderr.
	Log io.Writer
	// Progress, when set, is called about once a second while faults are
	// injected, from a goroutine of its own.
	Progress func(Progress)
	// KeepData keeps the nodes' data dirs, logs and the workers' files
	// (OutDir/run) after a run without violations; a failed run always
	// keeps them.
	KeepData bool
}

// Progress is how far the fault phase of a run has got.
type Progress struct {
	// Elapsed and Total are the time faults have been injected for and
	// Config.Duration.
	Elapsed, Total time.Duration
	// Ops counts the client operations the workers have recorded so far.
	Ops int
	// Faults counts the faults injected so far.
	Faults int
}

// Validate says what is wrong with c.
func (c Config) Validate() error {
	var errs []error
	if c.Nodes != 1 && c.Nodes != 3 && c.Nodes != 5 {
		errs = append(errs, fmt.Errorf("--nodes %d: want 1, 3 or 5", c.Nodes))
	}
	if c.Clients < 1 || c.Clients > 64 {
		errs = append(errs, fmt.Errorf("--clients %d: want 1 to 64", c.Clients))
	}
	if c.Locks < 1 || c.Locks > 100 {
		errs = append(errs, fmt.Errorf("--locks %d: want 1 to 100", c.Locks))
	}
	for _, w := range c.Workloads {
		if !slices.Contains(AllWorkloads, w) {
			errs = append(errs, fmt.Errorf("--workload %q: want some of %s", w, strings.Join(AllWorkloads, ",")))
		}
	}
	if c.hasWorkload(WorkloadSemaphore) && (c.Capacity < 1 || c.Capacity > 64) {
		errs = append(errs, fmt.Errorf("--capacity %d: want 1 to 64", c.Capacity))
	}
	for _, nc := range []struct {
		on             bool
		flag, workload string
	}{
		{c.OverCapacity, "--over-capacity", WorkloadSemaphore},
		{c.ReaderWithWriter, "--reader-with-writer", WorkloadRWLock},
		{c.SecondLeader, "--second-leader", WorkloadElection},
		{c.AckAnyToken, "--ack-any-token", WorkloadQueue},
		{c.LatchEarly, "--latch-early", WorkloadLatch},
	} {
		if nc.on && !c.hasWorkload(nc.workload) {
			errs = append(errs, fmt.Errorf("%s breaks the %s workload's rule, but --workload has no %s: the control would prove nothing", nc.flag, nc.workload, nc.workload))
		}
	}
	if c.Duration < time.Second || c.Duration > 24*time.Hour {
		errs = append(errs, fmt.Errorf("--duration %v: want 1s to 24h", c.Duration))
	}
	if c.TTL < 200*time.Millisecond || c.TTL > time.Minute {
		errs = append(errs, fmt.Errorf("--ttl %v: want 200ms to 1m", c.TTL))
	}
	if c.Resource != "fenced" && c.Resource != "unfenced" {
		errs = append(errs, fmt.Errorf("--resource %q: want fenced or unfenced", c.Resource))
	}
	if c.OutDir == "" {
		errs = append(errs, errors.New("--out: a directory for the history and report is needed"))
	}
	return errors.Join(errs...)
}

// workloads are the run's workloads: Workloads, or lock.
func (c Config) workloads() []string {
	if len(c.Workloads) == 0 {
		return []string{WorkloadLock}
	}
	return c.Workloads
}

func (c Config) hasWorkload(w string) bool { return slices.Contains(c.workloads(), w) }

// workerProc is one running worker process.
type workerProc struct {
	id   string
	proc *launch.Process
	out  string
}

// holding reports whether the worker's last recorded operation shows it
// holding a lock: an OK acquire, or a read or write after one.
func (w *workerProc) holding() bool {
	f, err := os.Open(w.out)
	if err != nil {
		return false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return false
	}
	buf := make([]byte, min(st.Size(), 4096))
	if _, err := f.ReadAt(buf, st.Size()-int64(len(buf))); err != nil {
		return false
	}
	lines := strings.Split(strings.TrimSpace(string(buf)), "\n")
	h, err := history.Read(strings.NewReader(lines[len(lines)-1]))
	if err != nil || len(h) == 0 {
		return false
	}
	last := h[0]
	return (last.Kind == history.OpAcquire && last.Outcome == history.OK) || last.Kind == history.OpRead || last.Kind == history.OpWrite
}

func (w *workerProc) signal(sig syscall.Signal) {
	w.proc.Signal(sig)
}

// Result is the outcome of a run.
type Result struct {
	Summary    report.Summary
	Violations []checker.Violation
	History    history.History
}

// Run starts the cluster and the workers, injects faults for
// cfg.Duration, heals, lets every client show it can still get a grant,
// reads every key back, checks the history and writes the report. The
// nodes' data dirs and logs (OutDir/run) are removed after a run without
// violations unless cfg.KeepData is set; it says on cfg.Log what it wrote
// and kept.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	res, err := run(ctx, cfg)
	logw := cfg.Log
	if logw == nil {
		logw = os.Stderr
	}
	work := filepath.Join(cfg.OutDir, "run")
	if _, serr := os.Stat(work); serr != nil {
		return res, err
	}
	size := dirSize(work)
	switch {
	case err == nil && len(res.Violations) == 0 && !cfg.KeepData:
		if rerr := os.RemoveAll(work); rerr != nil {
			return res, fmt.Errorf("remove the nodes' data: %w", rerr)
		}
		fmt.Fprintf(logw, "check: removed the nodes' data dirs and logs (%s in %s; --keep-data keeps them)\n", mib(size), work)
	default:
		fmt.Fprintf(logw, "check: kept the nodes' data dirs and logs: %s in %s\n", mib(size), work)
	}
	if err == nil {
		var files []string
		for _, name := range []string{"history.jsonl", "summary.json", "violations.json", "report.html"} {
			if st, serr := os.Stat(filepath.Join(cfg.OutDir, name)); serr == nil {
				files = append(files, fmt.Sprintf("%s (%s)", name, mib(st.Size())))
			}
		}
		fmt.Fprintf(logw, "check: wrote %s to %s\n", strings.Join(files, ", "), cfg.OutDir)
	}
	return res, err
}

// dirSize is the bytes of the regular files under dir.
func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, ierr := d.Info(); ierr == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// mib formats a size for a person.
func mib(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// run is Run without the clean-up of OutDir/run.
func run(ctx context.Context, cfg Config) (*Result, error) {
	if err := requireFaultsBuild(cfg.Binary); err != nil {
		return nil, err
	}
	logw := cfg.Log
	if logw == nil {
		logw = os.Stderr
	}
	say := func(format string, args ...any) { fmt.Fprintf(logw, "check: "+format+"\n", args...) }
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, err
	}
	work := filepath.Join(cfg.OutDir, "run")
	os.RemoveAll(work)
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	started := time.Now()
	var knobs []string
	if cfg.Resource == "unfenced" {
		knobs = append(knobs, "--test-unfenced-kv")
	}
	if cfg.UnscopedKV {
		knobs = append(knobs, "--test-unscoped-kv")
	}
	if cfg.ResetTokens {
		knobs = append(knobs, "--test-reset-tokens")
	}
	if cfg.AnyOwner {
		knobs = append(knobs, "--test-any-owner")
	}
	if cfg.OverCapacity {
		knobs = append(knobs, "--test-over-capacity")
	}
	if cfg.ReaderWithWriter {
		knobs = append(knobs, "--test-reader-with-writer")
	}
	if cfg.SecondLeader {
		knobs = append(knobs, "--test-second-leader")
	}
	if cfg.AckAnyToken {
		knobs = append(knobs, "--test-ack-any-token")
	}
	if cfg.LatchEarly {
		knobs = append(knobs, "--test-latch-early")
	}
	if cfg.MisdeliverSignedGrants {
		knobs = append(knobs, "--test-misdeliver-signed-grants")
	}
	if cfg.LeaseReads || cfg.UncheckedLeaseReads {
		knobs = append(knobs, "--lease-reads")
	}
	if cfg.UncheckedLeaseReads {
		knobs = append(knobs, "--test-unchecked-lease-reads")
	}
	say("starting %d node(s) in %s", cfg.Nodes, work)
	c, err := startCluster(ctx, cfg.Binary, work, cfg.Nodes, knobs, cfg.Secure)
	if err != nil {
		return nil, err
	}
	defer c.close()

	var mu sync.Mutex
	var nemesisOps history.History
	record := func(op history.Op) { mu.Lock(); nemesisOps = append(nemesisOps, op); mu.Unlock() }

	names := objectNames(cfg.workloads(), cfg.Locks)
	var workers []*workerProc
	for i := 0; i < cfg.Clients; i++ {
		w, err := startWorker(cfg, work, fmt.Sprintf("p%d", i+1), c.endpoints(), names, uint64(cfg.Seed)+uint64(i), c.sec.workerArgs())
		if err != nil {
			return nil, err
		}
		workers = append(workers, w)
	}
	stopWorkers := func() {
		for _, w := range workers {
			w.signal(syscall.SIGCONT)
			w.signal(syscall.SIGTERM)
		}
		for _, w := range workers {
			if !w.proc.Wait(10 * time.Second) {
				w.signal(syscall.SIGKILL)
				<-w.proc.Done()
			}
		}
	}
	defer stopWorkers()

	nem, err := newNemesis(c, uint64(cfg.Seed), cfg.Faults, cfg.TTL, func() []*workerProc { return workers }, record)
	if err != nil {
		return nil, err
	}
	defer nem.admin.Close()
	nem.keys = finalKeys(cfg, names, nil)
	say("workload %s: %d clients on %d objects each for %v, faults %s, seed %d", strings.Join(cfg.workloads(), ","), cfg.Clients, cfg.Locks, cfg.Duration, strings.Join(cfg.Faults, ","), cfg.Seed)
	fctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	stopProgress := reportProgress(fctx, cfg, workers, func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, op := range nemesisOps {
			if op.Kind == history.OpFault && op.Outcome == "start" {
				n++
			}
		}
		return n
	})
	nem.run(fctx)
	cancel()
	stopProgress()

	say("healing every fault")
	if err := nem.healAll(ctx); err != nil {
		say("%v", err)
	}
	healedAt := time.Now().UnixNano()
	record(history.Op{Process: history.NemesisProcess, Kind: history.OpFault, Fault: "all", Outcome: "healed", Invoke: healedAt, Complete: healedAt})
	// Let every client show it gets a grant again.
	sleepCtx(ctx, cfg.LivenessBound)
	stopWorkers()

	var h history.History
	for _, w := range workers {
		wh, err := history.ReadFile(w.out)
		if err != nil {
			return nil, fmt.Errorf("read %s's history: %w", w.id, err)
		}
		h = append(h, wh...)
	}
	say("reading every key back")
	h = append(h, finalReads(ctx, c, finalKeys(cfg, names, h))...)
	h = append(h, finalQueues(ctx, c, names)...)
	h = append(h, finalSigningKeys(ctx, c)...)
	h = append(h, nemesisOps...)
	for _, nd := range c.nodes {
		nh, err := history.ReadFile(nd.eventLog)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("read %s's events: %w", nd.id, err)
		}
		for i := range nh {
			nh[i].Process = nd.id
			nh[i].Complete = nh[i].Invoke
		}
		h = append(h, nh...)
	}
	h = h.Sorted()

	var live []string
	for _, w := range workers {
		live = append(live, w.id)
	}
	pre := report.Summarize(h, nil)
	say("checking ops=%d client operations and %d fault and server events (faults=%d injected)", pre.Ops, len(h)-pre.Ops, pre.FaultsInjected)
	violations := checker.All(h, checker.Options{OutDir: cfg.OutDir, HealedAt: healedAt, LivenessBound: cfg.LivenessBound, LiveProcesses: live})
	sum := report.Summarize(h, violations)
	sum.Seed, sum.Nodes, sum.Duration, sum.Faults, sum.Resource = cfg.Seed, cfg.Nodes, cfg.Duration, cfg.Faults, cfg.Resource
	sum.Workloads = cfg.workloads()
	sum.Started, sum.Ended = started, time.Now()
	sum.ChecksRun = []string{checker.StaleWriteCheck, checker.TokenOrderCheck, checker.MutualExclusionCheck, checker.LinearizabilityCheck,
		checker.LostAckCheck, checker.LivenessCheck, checker.OwnershipCheck, checker.ScopeCheck, checker.SignedGrantCheck}
	for _, p := range []struct{ workload, check string }{
		{WorkloadSemaphore, checker.SemaphoreCheck}, {WorkloadRWLock, checker.RWExclusionCheck}, {WorkloadElection, checker.ElectionCheck},
		{WorkloadQueue, checker.QueueCheck}, {WorkloadLatch, checker.LatchCheck},
	} {
		if cfg.hasWorkload(p.workload) {
			sum.ChecksRun = append(sum.ChecksRun, p.check)
		}
	}
	if err := report.Write(cfg.OutDir, h, violations, sum); err != nil {
		return nil, err
	}
	return &Result{Summary: sum, Violations: violations, History: h}, nil
}

// startWorker starts one worker process writing its history to a file.
// secArgs are the worker's TLS and token flags in a secure run.
func startWorker(cfg Config, dir, id string, endpoints, names []string, seed uint64, secArgs []string) (*workerProc, error) {
	out := filepath.Join(dir, id+".jsonl")
	logf, err := os.Create(filepath.Join(dir, id+".log"))
	if err != nil {
		return nil, err
	}
	args := []string{"check", "--worker", "--id", id, "--endpoints", strings.Join(endpoints, ","),
		"--names", strings.Join(names, ","), "--worker-capacity", fmt.Sprint(cfg.Capacity), "--worker-ttl", cfg.TTL.String(), "--seed", fmt.Sprint(seed), "--worker-out", out}
	args = append(args, secArgs...)
	p, err := launch.Start(launch.Spec{Bin: cfg.Binary, Args: args, Out: logf, OwnGroup: true, OnExit: func() { logf.Close() }})
	if err != nil {
		logf.Close()
		return nil, fmt.Errorf("start worker %s: %w", id, err)
	}
	return &workerProc{id: id, proc: p, out: out}, nil
}

// finalKeys are the keys the harness reads back at the end: every
// object's key (each slot's of a semaphore) and every key a worker wrote
// (a semaphore broken on purpose grants slots beyond its capacity).
func finalKeys(cfg Config, names []string, h history.History) []string {
	set := map[string]bool{}
	for _, name := range names {
		if w := workloadOf(name); w == WorkloadQueue || w == WorkloadLatch {
			continue // no kv key of the name (a claim's key is in a write)
		}
		if workloadOf(name) != WorkloadSemaphore {
			set[name] = true
			continue
		}
		for slot := 0; slot < cfg.Capacity; slot++ {
			set[slotKey(name, slot)] = true
		}
	}
	for _, op := range h {
		if op.Kind == history.OpWrite {
			set[op.Key] = true
		}
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	return keys
}

// finalReads reads every key once all faults are healed (process "final").
func finalReads(ctx context.Context, c *cluster, keys []string) history.History {
	cl, err := c.sec.adminClient(c.endpoints())
	if err != nil {
		return nil
	}
	defer cl.Close()
	sort.Strings(keys)
	var h history.History
	for _, key := range keys {
		op := history.Op{Process: history.FinalProcess, Kind: history.OpRead, Key: key, Invoke: time.Now().UnixNano()}
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		e, err := cl.KVGet(rctx, key)
		cancel()
		switch {
		case errors.Is(err, client.ErrKeyNotFound):
			op.Outcome, op.Token = history.NotFound, uint64(e.Token)
		case err != nil:
			op.Outcome, op.Error = history.Unknown, err.Error()
		default:
			op.Outcome, op.Value, op.Version, op.Token = history.OK, string(e.Value), e.Version, uint64(e.Token)
		}
		op.Complete = time.Now().UnixNano()
		h = append(h, op)
	}
	return h
}

// reportProgress calls cfg.Progress every second until ctx ends or the
// returned stop is called, counting the lines the workers have appended
// to their history files (one operation each).
func reportProgress(ctx context.Context, cfg Config, workers []*workerProc, faults func() int) (stop func()) {
	if cfg.Progress == nil {
		return func() {}
	}
	start := time.Now()
	counts := make([]lineCounter, len(workers))
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			ops := 0
			for i, w := range workers {
				ops += counts[i].count(w.out)
			}
			cfg.Progress(Progress{Elapsed: time.Since(start), Total: cfg.Duration, Ops: ops, Faults: faults()})
		}
	}()
	return func() { close(done); <-finished }
}

// lineCounter counts the lines of a file that only grows, reading only
// what was appended since the last count.
type lineCounter struct {
	offset int64
	lines  int
}

func (c *lineCounter) count(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return c.lines
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := f.ReadAt(buf, c.offset)
		c.offset += int64(n)
		c.lines += bytes.Count(buf[:n], []byte{'\n'})
		if err != nil || n == 0 {
			return c.lines
		}
	}
}
