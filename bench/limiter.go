package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fenced-dev/fenced/client"
)

// runLimiter runs the limiter workload: every client asks one rate
// limiter (a token bucket too large to refuse, so every take is decided
// and granted) for one permit at a time, with Allow; with Options.Batch
// above 1 each client's handle takes that many permits per round trip.
// A cycle is one decision handed to the caller.
func runLimiter(ctx context.Context, f *Fenced, o Options) (Result, error) {
	name := fmt.Sprintf("bench/limiter/%s", runID())
	c := f.clients[0]
	spec := client.LimiterSpec{Algorithm: client.TokenBucket, Limit: 1_000_000_000, Rate: 1_000_000_000, Window: time.Millisecond}
	if _, err := c.LimiterConfig(ctx, name, spec, false); err != nil {
		return Result{}, fmt.Errorf("bench: configure limiter %s: %w", name, err)
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
	for i := range o.Clients {
		var opts []client.LimiterOption
		if o.Batch > 1 {
			opts = append(opts, client.WithBatch(uint64(o.Batch), time.Second))
		}
		l := f.clients[i%len(f.clients)].Limiter(name, opts...)
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
		System: f.Name(), Workload: o.Workload, Clients: o.Clients, Batch: o.Batch,
		DurationS: m.elapsed.Seconds(), Cycles: int64(len(lat)), CyclesPerS: float64(len(lat)) / m.elapsed.Seconds(),
		P50Ms: lat.percentile(0.50), P90Ms: lat.percentile(0.90), P99Ms: lat.percentile(0.99), MaxMs: lat.percentile(1),
		CycleP50Ms: lat.percentile(0.50), CycleP99Ms: lat.percentile(0.99), Server: m.server,
	}
	errs.fill(&r)
	return m.finish(r)
}
