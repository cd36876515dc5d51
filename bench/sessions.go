package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// runSessions opens o.Sessions holders, o.Clients at a time, each taking
// its own lock, then keeps them all alive for o.Duration while the
// servers' CPU and RSS are sampled.
func runSessions(ctx context.Context, sys System, o Options) (Result, error) {
	before := rssOf(o.ServerPIDs)
	id := runID()
	lockers := make([]Locker, o.Sessions)
	defer func() { closeLockersAfter(ctx, lockers) }()
	var (
		errs   errorCount
		next   atomic.Int64
		mu     sync.Mutex
		lat    latencies
		wg     sync.WaitGroup
		start  = time.Now()
		opened atomic.Int64
	)
	measuredAt := atomic.Int64{} // UnixNano; 0 while opening
	stopProgress := reportProgress(o, func() Progress {
		if at := measuredAt.Load(); at != 0 {
			return Progress{Phase: "measuring", Elapsed: time.Duration(time.Now().UnixNano() - at), Total: o.Duration, Done: opened.Load()}
		}
		return Progress{Phase: "opening", Elapsed: time.Since(start), Done: opened.Load()}
	})
	defer stopProgress()
	for range min(o.Clients, o.Sessions) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine latencies
			defer func() {
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
			for ctx.Err() == nil && errs.n.Load() == 0 {
				i := int(next.Add(1) - 1)
				if i >= o.Sessions {
					return
				}
				l, err := sys.NewLocker(ctx, i, o.TTL)
				if err != nil {
					errs.add(fmt.Errorf("open holder %d: %w", i, err))
					return
				}
				lockers[i] = l
				t0 := time.Now()
				if _, err := l.Lock(ctx, fmt.Sprintf("bench/sessions/%s/%d", id, i)); err != nil {
					errs.add(fmt.Errorf("holder %d lock: %w", i, err))
					return
				}
				mine = append(mine, time.Since(t0))
				opened.Add(1)
			}
		}()
	}
	wg.Wait()
	setup := time.Since(start)
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	r := Result{
		System:   sys.Name(),
		Workload: o.Workload,
		Clients:  o.Clients,
		Sessions: o.Sessions,
	}
	errs.fill(&r)
	if r.Errors > 0 {
		return r, fmt.Errorf("bench: sessions: %s", r.FirstError)
	}

	// Every holder is open and holds its lock: measure the steady state.
	usage := startUsage(o.ServerPIDs)
	measured := time.Now()
	measuredAt.Store(measured.UnixNano())
	pause(ctx, o.Duration)
	elapsed := time.Since(measured)
	r.Server = usage.stop(elapsed)
	if r.Server != nil && before > 0 {
		r.Server.RSSBeforeMiB = float64(before) / (1 << 20)
		r.Server.BytesPerSession = float64(int64(r.Server.rssBytes)-before) / float64(o.Sessions)
	}
	interrupted := ctx.Err()

	lat.sort()
	r.DurationS = elapsed.Seconds()
	r.Cycles = int64(len(lat))
	r.CyclesPerS = float64(len(lat)) / setup.Seconds()
	r.P50Ms = lat.percentile(0.50)
	r.P90Ms = lat.percentile(0.90)
	r.P99Ms = lat.percentile(0.99)
	r.MaxMs = lat.percentile(1)
	if interrupted != nil {
		// Interrupted while the holders were kept alive: what was
		// measured until then, marked partial.
		r.Partial = true
		return r, interrupted
	}
	return r, nil
}
