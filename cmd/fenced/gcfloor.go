package main

import (
	"log/slog"
	"os"

	"github.com/fenced-dev/fenced/internal/gcfloor"
)

// defaultGCHeapFloorMiB is --gc-heap-floor-mib's default: a server with
// few sessions under load collects about once a second instead of several
// times (docs/benchmarks.md, "The collector's heap floor").
const defaultGCHeapFloorMiB = 64

// maxGCHeapFloorMiB bounds --gc-heap-floor-mib at 64 GiB.
const maxGCHeapFloorMiB = 64 << 10

// startGCHeapFloor keeps the collector's heap goal at about floorMiB MiB
// while the live heap is small, unless GOGC is set in the environment,
// which then wins. It returns the function that stops it.
func startGCHeapFloor(logger *slog.Logger, floorMiB int) (stop func()) {
	if floorMiB == 0 {
		return func() {}
	}
	if v, ok := os.LookupEnv("GOGC"); ok {
		logger.Info("GOGC is set in the environment; --gc-heap-floor-mib is ignored", "GOGC", v)
		return func() {}
	}
	return gcfloor.Start(uint64(floorMiB) << 20)
}
