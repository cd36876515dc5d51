package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// measure runs the measurement of a workload whose clients already run:
// it waits out the warm-up, turns measuring on for o.Duration while the
// servers' usage is sampled, then stops the clients (stop) and waits for
// them (wg). It returns the measured time and the servers' usage, or ctx's
// error when ctx ended first.
func measure(ctx context.Context, o Options, measuring *atomic.Bool, stop func(), wg *sync.WaitGroup) (time.Duration, *ServerUsage, error) {
	pause(ctx, o.Warmup)
	usage := startUsage(o.ServerPIDs)
	measuring.Store(true)
	start := time.Now()
	pause(ctx, o.Duration)
	measuring.Store(false)
	elapsed := time.Since(start)
	server := usage.stop(elapsed)
	stop()
	wg.Wait()
	return elapsed, server, ctx.Err()
}
