package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Workload names one of the workloads Run knows.
type Workload string

// The workloads; see the package documentation.
const (
	WorkloadLock        Workload = "lock"
	WorkloadHandoff     Workload = "handoff"
	WorkloadSessions    Workload = "sessions"
	WorkloadFencedWrite Workload = "fenced-write"
	WorkloadSemaphore   Workload = "semaphore"
	WorkloadRWLock      Workload = "rwlock"
	// WorkloadLimiter asks a rate limiter for permits (systems
	// implementing LimiterSystem).
	WorkloadLimiter Workload = "limiter"
	// WorkloadQueue pushes, claims and acks items of one shared work
	// queue (lockers implementing Queuer).
	WorkloadQueue Workload = "queue"
	// WorkloadRead reads one kv key, linearizably (fenced only).
	WorkloadRead Workload = "read"
)

// RWLockWriteShare is the share of the rwlock workload's cycles that take
// the write grant; the others take a read grant.
const RWLockWriteShare = 0.1

// Workloads lists every workload, in the order they are documented.
var Workloads = []Workload{WorkloadLock, WorkloadHandoff, WorkloadSessions, WorkloadFencedWrite, WorkloadSemaphore, WorkloadRWLock, WorkloadLimiter, WorkloadQueue, WorkloadRead}

// Options configures one Run.
type Options struct {
	// Workload to run.
	Workload Workload
	// Clients is how many lockers run cycles concurrently (lock, handoff,
	// fenced-write), or open sessions concurrently (sessions). 1–10000.
	Clients int
	// Sessions is how many holders the sessions workload keeps alive.
	// 1–1000000; ignored by the other workloads.
	Sessions int
	// Duration is how long the measurement lasts, after Warmup.
	Duration time.Duration
	// Warmup runs the workload unmeasured before the measurement (not used
	// by the sessions workload, whose set-up is its warm-up).
	Warmup time.Duration
	// TTL is each locker's session TTL. 0 means DefaultTTL.
	TTL time.Duration
	// ValueSize is the size of each write in the fenced-write workload.
	// 0 means 128 bytes.
	ValueSize int
	// Capacity is the semaphore's capacity in the semaphore workload.
	// 0 means 8; at most 1000000.
	Capacity int
	// Batch is how many permits each client of the limiter workload takes
	// per round trip (client.WithBatch); 0 or 1: one per decision.
	// 0–10000.
	Batch int
	// SeparateAck makes the queue workload ack each item in a command of
	// its own. By default a worker acks its previous item with its next
	// claim (ack-and-claim-next) where the system has it (AckClaimer),
	// as fenced work does.
	SeparateAck bool
	// ServerPIDs are the server processes whose CPU and RSS are sampled
	// during the measurement, when they run on this machine. Empty: none.
	ServerPIDs []int
	// Progress, when set, is called about once a second while the
	// workload runs, from a goroutine of its own.
	Progress func(Progress)
}

// Progress is how far a run has got.
type Progress struct {
	// Phase is "warmup", "opening" (the sessions workload's holders) or
	// "measuring".
	Phase string
	// Elapsed and Total are the time spent in the phase and its length
	// (0 when it has none, as "opening").
	Elapsed, Total time.Duration
	// Done counts cycles completed, or holders opened, in the phase.
	Done int64
}

// progressEvery is how often Options.Progress is called.
const progressEvery = time.Second

// reportProgress calls o.Progress every progressEvery with what now
// returns, until the returned stop is called.
func reportProgress(o Options, now func() Progress) (stop func()) {
	if o.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				o.Progress(now())
			}
		}
	}()
	return func() { close(done); <-finished }
}

// DefaultTTL is the session TTL lockers get when Options.TTL is 0.
const DefaultTTL = 10 * time.Second

// Validate reports what is wrong with o, if anything.
func (o Options) Validate() error {
	switch o.Workload {
	case WorkloadLock, WorkloadHandoff, WorkloadSessions, WorkloadFencedWrite, WorkloadSemaphore, WorkloadRWLock, WorkloadLimiter, WorkloadQueue, WorkloadRead:
	default:
		return fmt.Errorf("bench: unknown workload %q; want one of %v", o.Workload, Workloads)
	}
	if o.Clients < 1 || o.Clients > 10000 {
		return fmt.Errorf("bench: clients %d out of range; want 1–10000", o.Clients)
	}
	if o.Workload == WorkloadSessions && (o.Sessions < 1 || o.Sessions > 1000000) {
		return fmt.Errorf("bench: sessions %d out of range; want 1–1000000", o.Sessions)
	}
	if o.Batch < 0 || o.Batch > 10000 {
		return fmt.Errorf("bench: batch %d out of range; want 0–10000", o.Batch)
	}
	if o.Duration <= 0 || o.Duration > 24*time.Hour {
		return fmt.Errorf("bench: duration %v out of range; want more than 0 and at most 24h", o.Duration)
	}
	if o.Warmup < 0 || o.Warmup > time.Hour {
		return fmt.Errorf("bench: warm-up %v out of range; want 0–1h", o.Warmup)
	}
	if o.TTL < 0 || o.TTL > 24*time.Hour {
		return fmt.Errorf("bench: ttl %v out of range; want 0 (default %v) up to 24h", o.TTL, DefaultTTL)
	}
	if o.ValueSize < 0 || o.ValueSize > 1<<20 {
		return fmt.Errorf("bench: value size %d out of range; want 0 (default 128) up to 1048576", o.ValueSize)
	}
	if o.Capacity < 0 || o.Capacity > 1000000 {
		return fmt.Errorf("bench: capacity %d out of range; want 0 (default 8) up to 1000000", o.Capacity)
	}
	for _, pid := range o.ServerPIDs {
		if pid <= 0 {
			return fmt.Errorf("bench: server pid %d is not a process id", pid)
		}
	}
	return nil
}

// Result is what one Run measured. Latencies are in milliseconds.
type Result struct {
	System   string   `json:"system"`
	Workload Workload `json:"workload"`
	Clients  int      `json:"clients"`
	Sessions int      `json:"sessions,omitempty"`
	// Batch is the limiter workload's permits per round trip.
	Batch int `json:"batch,omitempty"`
	// DurationS is the measured time in seconds.
	DurationS float64 `json:"duration_s"`
	// Cycles completed in the measured time: acquire → (write →) release
	// cycles, for the sessions workload holders opened, for the limiter
	// workload decisions, for the queue workload items pushed, claimed
	// and acked.
	Cycles     int64   `json:"cycles"`
	CyclesPerS float64 `json:"cycles_per_s"`
	// P50Ms … MaxMs are the acquire latency: from asking for the lock to
	// holding its token (in handoff, this includes waiting in the queue);
	// in the queue workload, the claim's.
	P50Ms float64 `json:"p50_ms"`
	P90Ms float64 `json:"p90_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
	// CycleP50Ms and CycleP99Ms are the latency of a whole cycle.
	CycleP50Ms float64 `json:"cycle_p50_ms"`
	CycleP99Ms float64 `json:"cycle_p99_ms"`
	// Errors counts failed calls; FirstError is the first of them.
	Errors     int64  `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
	// TokenOrderViolations counts handoff grants (rwlock: write grants;
	// queue: claims of one item) whose token was not greater than the
	// token of the grant seen before it. Any is a bug.
	TokenOrderViolations int64 `json:"token_order_violations"`
	// CapacityViolations counts, in the semaphore workload, permits that
	// made more clients hold a permit at once than the capacity (counted
	// from acquire's return to just before release is sent, so never above
	// what the server holds). Any is a bug.
	CapacityViolations int64 `json:"capacity_violations,omitempty"`
	// Redeliveries counts, in the queue workload, claims of an item that
	// had been claimed before (its earlier claim ended unacked, by the
	// visibility timeout, say).
	Redeliveries int64 `json:"redeliveries,omitempty"`
	// Server is the servers' resource use during the measurement, when
	// Options.ServerPIDs named them.
	Server *ServerUsage `json:"server,omitempty"`
	// Client is this process's own CPU use during the measurement: the
	// clients' (in the sessions workload, keeping the holders alive).
	Client *ClientUsage `json:"client,omitempty"`
	// Partial marks the result of a run interrupted during its
	// measurement (Run also returns the context's error): it covers the
	// DurationS measured until then.
	Partial bool `json:"partial,omitempty"`
}

// Run runs one workload against sys and measures it. It returns an error
// when the options are invalid, when the lockers cannot be opened, or when
// no cycle completed; failed calls during the measurement are counted in
// the Result instead.
func Run(ctx context.Context, sys System, o Options) (Result, error) {
	if err := o.Validate(); err != nil {
		return Result{}, err
	}
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.ValueSize == 0 {
		o.ValueSize = 128
	}
	if o.Capacity == 0 {
		o.Capacity = 8
	}
	if o.Workload == WorkloadSessions {
		return runSessions(ctx, sys, o)
	}
	if o.Workload == WorkloadLimiter {
		return runLimiter(ctx, sys, o)
	}
	if o.Workload == WorkloadQueue {
		return runQueue(ctx, sys, o)
	}
	if o.Workload == WorkloadRead {
		f, ok := sys.(*Fenced)
		if !ok {
			return Result{}, fmt.Errorf("bench: the read workload runs against fenced only, not %s", sys.Name())
		}
		return runRead(ctx, f, o)
	}
	return runCycles(ctx, sys, o)
}

// runID returns a random prefix that keeps lock names of one run apart
// from those of earlier runs against the same server.
func runID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// openLockers opens n lockers, at most parallel at a time, closing those
// opened when one fails.
func openLockers(ctx context.Context, sys System, n, parallel int, ttl time.Duration) ([]Locker, error) {
	lockers := make([]Locker, n)
	var (
		wg       sync.WaitGroup
		next     atomic.Int64
		mu       sync.Mutex
		firstErr error
	)
	for range min(parallel, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				l, err := sys.NewLocker(ctx, i, ttl)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("bench: open locker %d of %d on %s: %w", i, n, sys.Name(), err)
					}
					mu.Unlock()
					return
				}
				lockers[i] = l
			}
		}()
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	if firstErr != nil {
		closeLockers(lockers)
		return nil, firstErr
	}
	return lockers, nil
}

// interruptedClose is how long the lockers of an interrupted run get to
// close: a server that went away would hold each close for its timeout,
// and the servers end the sessions by their TTL anyway.
const interruptedClose = 300 * time.Millisecond

// closeLockersAfter closes the lockers; when ctx has ended (the run was
// interrupted) it waits for them at most interruptedClose.
func closeLockersAfter(ctx context.Context, lockers []Locker) {
	if ctx.Err() == nil {
		closeLockers(lockers)
		return
	}
	done := make(chan struct{})
	go func() { closeLockers(lockers); close(done) }()
	select {
	case <-done:
	case <-time.After(interruptedClose):
	}
}

// closeLockers closes every non-nil locker, in parallel.
func closeLockers(lockers []Locker) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for _, l := range lockers {
		if l == nil {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_ = l.Close()
		}()
	}
	wg.Wait()
}

// errorCount counts failed calls and keeps the first.
type errorCount struct {
	n     atomic.Int64
	mu    sync.Mutex
	first error
}

func (e *errorCount) add(err error) {
	if e.n.Add(1) == 1 {
		e.mu.Lock()
		e.first = err
		e.mu.Unlock()
	}
}

func (e *errorCount) fill(r *Result) {
	r.Errors = e.n.Load()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.first != nil {
		r.FirstError = e.first.Error()
	}
}

// errNoCycles is returned when a run completed nothing.
var errNoCycles = errors.New("bench: no cycle completed in the measured time")
