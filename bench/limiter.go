package bench

import (
	"context"
	"fmt"
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
	return runTimedOps(ctx, o, sys.Name(), len(handles), func(ctx context.Context, i int) error {
		ok, err := handles[i].Allow(ctx)
		if err != nil || !ok {
			return fmt.Errorf("allow %s: granted %v, %v", name, ok, err)
		}
		return nil
	})
}
