package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// measurement is what measure saw of a workload's measured time.
type measurement struct {
	elapsed time.Duration
	server  *ServerUsage
	client  *ClientUsage
	// interrupted is ctx's error when ctx ended during the measured time:
	// what was measured until then is a partial result.
	interrupted error
}

// measure runs the measurement of a workload whose clients already run
// and count what they complete in completed: it waits out the warm-up,
// turns measuring on for o.Duration while the servers' usage is sampled,
// then stops the clients (stop) and waits for them (wg). Meanwhile it
// reports the phase and the completed count to o.Progress. It returns
// ctx's error, and nothing measured, when ctx ended during the warm-up.
func measure(ctx context.Context, o Options, measuring *atomic.Bool, completed *atomic.Int64, stop func(), wg *sync.WaitGroup) (measurement, error) {
	var (
		phase     atomic.Value // string
		phaseAt   atomic.Int64 // UnixNano
		phaseBase atomic.Int64 // completed at the phase's start
	)
	setPhase := func(p string) {
		phaseBase.Store(completed.Load())
		phaseAt.Store(time.Now().UnixNano())
		phase.Store(p)
	}
	setPhase("warmup")
	stopProgress := reportProgress(o, func() Progress {
		p := phase.Load().(string)
		total := o.Warmup
		if p == "measuring" {
			total = o.Duration
		}
		return Progress{Phase: p, Elapsed: time.Duration(time.Now().UnixNano() - phaseAt.Load()), Total: total, Done: completed.Load() - phaseBase.Load()}
	})
	pause(ctx, o.Warmup)
	warmedUp := ctx.Err() == nil
	usage := startUsage(o.ServerPIDs)
	self := startClientUsage()
	setPhase("measuring")
	measuring.Store(true)
	start := time.Now()
	pause(ctx, o.Duration)
	measuring.Store(false)
	stopProgress()
	elapsed := time.Since(start)
	server := usage.stop(elapsed)
	client := self.stop(elapsed)
	stop()
	wg.Wait()
	if err := ctx.Err(); err != nil && !warmedUp {
		return measurement{}, err
	}
	return measurement{elapsed: elapsed, server: server, client: client, interrupted: ctx.Err()}, nil
}

// finish returns r measured by m: an interrupted measurement's result is
// marked partial and returned with the interruption, or only the
// interruption when nothing completed; a measurement that completed no
// cycle is an error.
func (m measurement) finish(r Result) (Result, error) {
	r.Client = m.client
	if m.interrupted != nil {
		if r.Cycles == 0 {
			return Result{}, m.interrupted
		}
		r.Partial = true
		return r, m.interrupted
	}
	if r.Cycles == 0 {
		return r, fmt.Errorf("%w (errors: %d, first: %s)", errNoCycles, r.Errors, r.FirstError)
	}
	return r, nil
}
