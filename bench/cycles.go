package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// runCycles runs the lock, handoff and fenced-write workloads: every
// client repeats acquire → (write →) release until the measurement ends.
func runCycles(ctx context.Context, sys System, o Options) (Result, error) {
	lockers, err := openLockers(ctx, sys, o.Clients, min(o.Clients, 64), o.TTL)
	if err != nil {
		return Result{}, err
	}
	defer func() { closeLockersAfter(ctx, lockers) }()
	if o.Workload == WorkloadFencedWrite {
		if _, ok := lockers[0].(FencedWriter); !ok {
			return Result{}, fmt.Errorf("bench: %s has no fenced resource to write to; the fenced-write workload needs one", sys.Name())
		}
	}
	if o.Workload == WorkloadRWLock {
		if _, ok := lockers[0].(RWLocker); !ok {
			return Result{}, fmt.Errorf("bench: %s has no read/write lock; the rwlock workload needs one", sys.Name())
		}
	}
	if o.Workload == WorkloadSemaphore {
		if _, ok := lockers[0].(Semaphorer); !ok {
			return Result{}, fmt.Errorf("bench: %s has no semaphore; the semaphore workload needs one", sys.Name())
		}
	}
	ops := lockOps
	var sem *semaphoreCheck
	if o.Workload == WorkloadSemaphore {
		sem = &semaphoreCheck{capacity: int64(o.Capacity)}
		ops = sem.ops(o.Capacity)
	}

	id := runID()
	value := make([]byte, o.ValueSize)
	for i := range value {
		value[i] = 'a' + byte(i%26)
	}
	var (
		measuring atomic.Bool
		completed atomic.Int64 // cycles completed, for Progress
		errs      errorCount
		order     tokenOrder
		mu        sync.Mutex
		acquire   latencies
		cycle     latencies
		wg        sync.WaitGroup
	)
	if o.Workload == WorkloadRWLock {
		ops = rwOps(&order)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	for i, l := range lockers {
		name := fmt.Sprintf("bench/%s/%s/%d", o.Workload, id, i)
		if o.Workload == WorkloadHandoff || o.Workload == WorkloadSemaphore || o.Workload == WorkloadRWLock {
			name = fmt.Sprintf("bench/%s/%s", o.Workload, id)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var myAcquire, myCycle latencies
			for runCtx.Err() == nil {
				counted := measuring.Load()
				start := time.Now()
				token, err := ops.acquire(runCtx, l, name)
				if err != nil {
					if runCtx.Err() == nil {
						errs.add(fmt.Errorf("lock %s: %w", name, err))
						pause(runCtx, 10*time.Millisecond)
					}
					continue
				}
				acquired := time.Since(start)
				if o.Workload == WorkloadHandoff {
					order.observe(token)
				}
				if o.Workload == WorkloadFencedWrite {
					if err := l.(FencedWriter).FencedWrite(runCtx, name, value, token); err != nil && runCtx.Err() == nil {
						errs.add(fmt.Errorf("write %s with token %d: %w", name, token, err))
					}
				}
				// The release is not cut short by the end of the run:
				// the next run must find the lock free.
				if err := ops.release(context.WithoutCancel(runCtx), l, name); err != nil {
					errs.add(fmt.Errorf("unlock %s: %w", name, err))
					pause(runCtx, 10*time.Millisecond)
					continue
				}
				completed.Add(1)
				if counted && measuring.Load() {
					myAcquire = append(myAcquire, acquired)
					myCycle = append(myCycle, time.Since(start))
				}
			}
			mu.Lock()
			acquire = append(acquire, myAcquire...)
			cycle = append(cycle, myCycle...)
			mu.Unlock()
		}()
	}

	m, err := measure(ctx, o, &measuring, &completed, stop, &wg)
	if err != nil {
		return Result{}, err
	}

	acquire.sort()
	cycle.sort()
	r := Result{
		System:               sys.Name(),
		Workload:             o.Workload,
		Clients:              o.Clients,
		DurationS:            m.elapsed.Seconds(),
		Cycles:               int64(len(cycle)),
		CyclesPerS:           float64(len(cycle)) / m.elapsed.Seconds(),
		P50Ms:                acquire.percentile(0.50),
		P90Ms:                acquire.percentile(0.90),
		P99Ms:                acquire.percentile(0.99),
		MaxMs:                acquire.percentile(1),
		CycleP50Ms:           cycle.percentile(0.50),
		CycleP99Ms:           cycle.percentile(0.99),
		TokenOrderViolations: order.violations.Load() + sem.tokenViolations(),
		CapacityViolations:   sem.capacityViolations(),
		Server:               m.server,
	}
	errs.fill(&r)
	return m.finish(r)
}

// rwOps are the cycles of the rwlock workload: the write grant in every
// 1/RWLockWriteShare-th cycle over all clients, a read grant otherwise.
// Write tokens go through order: writers hold the lock alone, so they see
// their grants one after the other.
func rwOps(order *tokenOrder) cycleOps {
	every := int64(1 / RWLockWriteShare)
	var n atomic.Int64
	return cycleOps{
		acquire: func(ctx context.Context, l Locker, name string) (uint64, error) {
			write := n.Add(1)%every == 0
			tok, err := l.(RWLocker).RWLock(ctx, name, write)
			if err == nil && write {
				order.observe(tok)
			}
			return tok, err
		},
		release: func(ctx context.Context, l Locker, name string) error { return l.(RWLocker).RWUnlock(ctx, name) },
	}
}

// cycleOps are the acquire and release of one cycle: a lock's, or a
// semaphore permit's.
type cycleOps struct {
	acquire func(ctx context.Context, l Locker, name string) (uint64, error)
	release func(ctx context.Context, l Locker, name string) error
}

var lockOps = cycleOps{
	acquire: func(ctx context.Context, l Locker, name string) (uint64, error) { return l.Lock(ctx, name) },
	release: func(ctx context.Context, l Locker, name string) error { return l.Unlock(ctx, name) },
}

// semaphoreCheck checks the semaphore workload as it runs: no more
// clients hold a permit at once than the capacity, and the tokens of
// successive holders of each slot increase.
type semaphoreCheck struct {
	capacity int64
	holding  atomic.Int64
	over     atomic.Int64
	mu       sync.Mutex
	slots    map[int]*tokenOrder
}

func (c *semaphoreCheck) ops(capacity int) cycleOps {
	return cycleOps{
		acquire: func(ctx context.Context, l Locker, name string) (uint64, error) {
			token, slot, err := l.(Semaphorer).AcquirePermit(ctx, name, capacity)
			if err != nil {
				return 0, err
			}
			if c.holding.Add(1) > c.capacity {
				c.over.Add(1)
			}
			// A system without slots (slot -1) grants its permits to
			// concurrent holders, so there is no one order to check.
			if slot >= 0 {
				c.slot(slot).observe(token)
			}
			return token, nil
		},
		release: func(ctx context.Context, l Locker, name string) error {
			c.holding.Add(-1)
			return l.(Semaphorer).ReleasePermit(ctx, name)
		},
	}
}

func (c *semaphoreCheck) slot(n int) *tokenOrder {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.slots == nil {
		c.slots = map[int]*tokenOrder{}
	}
	if c.slots[n] == nil {
		c.slots[n] = &tokenOrder{}
	}
	return c.slots[n]
}

func (c *semaphoreCheck) tokenViolations() int64 {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, o := range c.slots {
		n += o.violations.Load()
	}
	return n
}

func (c *semaphoreCheck) capacityViolations() int64 {
	if c == nil {
		return 0
	}
	return c.over.Load()
}

// tokenOrder checks that the tokens of successive holders of one lock
// increase, in the order the holders saw their grants.
type tokenOrder struct {
	mu         sync.Mutex
	last       uint64
	violations atomic.Int64
}

func (t *tokenOrder) observe(token uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if token <= t.last {
		t.violations.Add(1)
	}
	t.last = token
}

// pause waits for d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
