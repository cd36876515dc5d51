package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// runRead runs the read workload: one kv key, written once under a lock's
// token, then every client reads it with KVGet, one read in flight per
// client. A cycle is one read. Each read is linearizable: the leader
// confirms its leadership with a quorum first, or, with --lease-reads on
// the servers, checks its leader lease instead.
func runRead(ctx context.Context, f *Fenced, o Options) (Result, error) {
	key := fmt.Sprintf("bench/read/%s", runID())
	w, err := f.NewLocker(ctx, 0, o.TTL)
	if err != nil {
		return Result{}, fmt.Errorf("bench: open the writer: %w", err)
	}
	token, err := w.Lock(ctx, key)
	if err == nil {
		err = w.(*fencedLocker).FencedWrite(ctx, key, make([]byte, o.ValueSize), token)
	}
	if err == nil {
		err = w.Unlock(ctx, key)
	}
	closeErr := w.Close()
	if err != nil || closeErr != nil {
		return Result{}, fmt.Errorf("bench: write %s: %v %v", key, err, closeErr)
	}
	var (
		measuring atomic.Bool
		completed atomic.Int64
		errs      errorCount
		mu        sync.Mutex
		lat       latencies
		wg        sync.WaitGroup
	)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	for i := range o.Clients {
		c := f.clients[i%len(f.clients)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine latencies
			for runCtx.Err() == nil {
				counted := measuring.Load()
				start := time.Now()
				if _, err := c.KVGet(runCtx, key); err != nil {
					if runCtx.Err() == nil {
						errs.add(fmt.Errorf("kv get %s: %w", key, err))
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
		System: f.Name(), Workload: o.Workload, Clients: o.Clients,
		DurationS: m.elapsed.Seconds(), Cycles: int64(len(lat)), CyclesPerS: float64(len(lat)) / m.elapsed.Seconds(),
		P50Ms: lat.percentile(0.50), P90Ms: lat.percentile(0.90), P99Ms: lat.percentile(0.99), MaxMs: lat.percentile(1),
		CycleP50Ms: lat.percentile(0.50), CycleP99Ms: lat.percentile(0.99), Server: m.server,
	}
	errs.fill(&r)
	return m.finish(r)
}
