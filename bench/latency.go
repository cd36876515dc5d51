package bench

import (
	"slices"
	"time"
)

// latencies collects durations and reports their percentiles.
type latencies []time.Duration

// percentile returns the p-th percentile (0 < p ≤ 1) of sorted l, in
// milliseconds, by the nearest-rank method; 0 when l is empty.
func (l latencies) percentile(p float64) float64 {
	if len(l) == 0 {
		return 0
	}
	rank := int(p*float64(len(l))+0.999999) - 1
	rank = max(0, min(rank, len(l)-1))
	return float64(l[rank]) / float64(time.Millisecond)
}

func (l latencies) sort() { slices.Sort(l) }
