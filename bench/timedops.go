package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// runTimedOps runs clients goroutines, each calling op(ctx, i) with its
// index i in a loop until the run ends, and times every call: a cycle is
// one call that succeeded. A failed call is counted as an error (its
// message from op) and its client pauses 10ms. It is the shape of the
// workloads whose cycle is one call (read, limiter).
func runTimedOps(ctx context.Context, o Options, system string, clients int, op func(ctx context.Context, i int) error) (Result, error) {
	var (
		measuring atomic.Bool
		completed atomic.Int64 // calls that succeeded, for Progress
		errs      errorCount
		mu        sync.Mutex
		lat       latencies
		wg        sync.WaitGroup
	)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine latencies
			for runCtx.Err() == nil {
				counted := measuring.Load()
				start := time.Now()
				if err := op(runCtx, i); err != nil {
					if runCtx.Err() == nil {
						errs.add(err)
						pause(runCtx, 10*time.Millisecond)
					}
					continue
				}
				completed.Add(1)
				if counted && measuring.Load() {
					mine = append(mine, time.Since(start))
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	m, err := measure(ctx, o, &measuring, &completed, stop, &wg)
	if err != nil {
		return Result{}, err
	}
	lat.sort()
	r := Result{
		System: system, Workload: o.Workload, Clients: o.Clients, Batch: o.Batch,
		DurationS: m.elapsed.Seconds(), Cycles: int64(len(lat)), CyclesPerS: float64(len(lat)) / m.elapsed.Seconds(),
		P50Ms: lat.percentile(0.50), P90Ms: lat.percentile(0.90), P99Ms: lat.percentile(0.99), MaxMs: lat.percentile(1),
		CycleP50Ms: lat.percentile(0.50), CycleP99Ms: lat.percentile(0.99), Server: m.server,
	}
	errs.fill(&r)
	return m.finish(r)
}
