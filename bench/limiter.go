package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Limiter bucket of the limiter workload: too large to refuse at any rate
// a benchmark reaches, so every take is decided and granted.
const (
	limiterCapacity = 1_000_000_000
	limiterRate     = 1_000_000_000
)

// runLimiter runs the limiter workload: every client asks one rate
// limiter (a token bucket too large to refuse, so every take is decided
// and granted) for one permit at a time, with Allow; with Options.Batch
// above 1 each client's handle takes that many permits per round trip.
// A cycle is one decision handed to the caller.
func runLimiter(ctx context.Context, sys System, o Options) (Result, error) {
	ls, ok := sys.(LimiterSystem)
	if !ok {
		return Result{}, fmt.Errorf("bench: %s has no rate limiter; the limiter workload needs one", sys.Name())
	}
	name := fmt.Sprintf("bench/limiter/%s", runID())
	handles, err := ls.NewLimiters(ctx, name, limiterCapacity, limiterRate, o.Clients, o.Batch)
	if err != nil {
		return Result{}, fmt.Errorf("bench: limiter %s on %s: %w", name, sys.Name(), err)
	}
	var (
		measuring atomic.Bool
		completed atomic.Int64 // decisions handed out, for Progress
		errs      errorCount
		mu        sync.Mutex
		lat       latencies
		wg        sync.WaitGroup
	)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	for _, l := range handles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine latencies
			for runCtx.Err() == nil {
				counted := measuring.Load()
				start := time.Now()
				ok, err := l.Allow(runCtx)
				if err != nil || !ok {
					if runCtx.Err() == nil {
						errs.add(fmt.Errorf("allow %s: granted %v, %v", name, ok, err))
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
		System: sys.Name(), Workload: o.Workload, Clients: o.Clients, Batch: o.Batch,
		DurationS: m.elapsed.Seconds(), Cycles: int64(len(lat)), CyclesPerS: float64(len(lat)) / m.elapsed.Seconds(),
		P50Ms: lat.percentile(0.50), P90Ms: lat.percentile(0.90), P99Ms: lat.percentile(0.99), MaxMs: lat.percentile(1),
		CycleP50Ms: lat.percentile(0.50), CycleP99Ms: lat.percentile(0.99), Server: m.server,
	}
	errs.fill(&r)
	return m.finish(r)
}
