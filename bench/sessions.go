package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Holders are the lockers of the sessions workload: each has a session of
// its own and holds a lock of its own, and the system keeps every session
// alive until Close.
type Holders struct {
	lockers []Locker
	setup   time.Duration
	lat     latencies // acquire latencies, sorted
}

// Len is how many holders are open.
func (h *Holders) Len() int { return len(h.lockers) }

// Setup is how long opening them took.
func (h *Holders) Setup() time.Duration { return h.setup }

// Close ends every holder's session, releasing its lock; when ctx has
// ended it waits for them only briefly (the servers end the sessions by
// their TTL anyway).
func (h *Holders) Close(ctx context.Context) { closeLockersAfter(ctx, h.lockers) }

// OpenHolders opens o.Sessions holders, o.Clients at a time, each with its
// own session of o.TTL (0: DefaultTTL) taking its own lock, reporting the
// phase "opening" to o.Progress. On error the holders opened so far are
// closed.
func OpenHolders(ctx context.Context, sys System, o Options) (*Holders, error) {
	o.Workload = WorkloadSessions
	if o.Duration == 0 {
		o.Duration = time.Second // not used to open
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	var opened atomic.Int64
	start := time.Now()
	stop := reportProgress(o, func() Progress {
		return Progress{Phase: "opening", Elapsed: time.Since(start), Done: opened.Load()}
	})
	h, errs := openHolders(ctx, sys, o, &opened)
	stop()
	var r Result
	errs.fill(&r)
	switch {
	case ctx.Err() != nil:
		h.Close(ctx)
		return nil, ctx.Err()
	case r.Errors > 0:
		h.Close(ctx)
		return nil, fmt.Errorf("bench: open holders: %s", r.FirstError)
	}
	return h, nil
}

// openHolders opens the holders of o, counting them in opened as they
// come. It stops at the first error, which errs keeps; the holders opened
// until then are in the returned Holders, for the caller to close.
func openHolders(ctx context.Context, sys System, o Options, opened *atomic.Int64) (*Holders, *errorCount) {
	id := runID()
	h := &Holders{lockers: make([]Locker, o.Sessions)}
	var (
		errs  = &errorCount{}
		next  atomic.Int64
		mu    sync.Mutex
		wg    sync.WaitGroup
		start = time.Now()
	)
	for range min(o.Clients, o.Sessions) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine latencies
			defer func() {
				mu.Lock()
				h.lat = append(h.lat, mine...)
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
				h.lockers[i] = l
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
	h.setup = time.Since(start)
	h.lat.sort()
	return h, errs
}

// runSessions opens o.Sessions holders, o.Clients at a time, each taking
// its own lock, then keeps them all alive for o.Duration while the
// servers' CPU and RSS are sampled.
func runSessions(ctx context.Context, sys System, o Options) (Result, error) {
	before := rssOf(o.ServerPIDs)
	var opened atomic.Int64
	start := time.Now()
	measuredAt := atomic.Int64{} // UnixNano; 0 while opening
	stopProgress := reportProgress(o, func() Progress {
		if at := measuredAt.Load(); at != 0 {
			return Progress{Phase: "measuring", Elapsed: time.Duration(time.Now().UnixNano() - at), Total: o.Duration, Done: opened.Load()}
		}
		return Progress{Phase: "opening", Elapsed: time.Since(start), Done: opened.Load()}
	})
	defer stopProgress()
	h, errs := openHolders(ctx, sys, o, &opened)
	defer func() { h.Close(ctx) }()
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
	self := startClientUsage()
	measured := time.Now()
	measuredAt.Store(measured.UnixNano())
	pause(ctx, o.Duration)
	elapsed := time.Since(measured)
	r.Server = usage.stop(elapsed)
	r.Client = self.stop(elapsed)
	if r.Server != nil && before > 0 {
		r.Server.RSSBeforeMiB = float64(before) / (1 << 20)
		r.Server.BytesPerSession = float64(int64(r.Server.rssBytes)-before) / float64(o.Sessions)
	}
	interrupted := ctx.Err()

	lat := h.lat
	r.DurationS = elapsed.Seconds()
	r.Cycles = int64(len(lat))
	r.CyclesPerS = float64(len(lat)) / h.setup.Seconds()
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
