// Package heapcost measures the Go heap a structure keeps live, for the
// benchmarks that report memory per item (docs/benchmarks.md, "The cost
// of scale").
package heapcost

import "runtime"

// PerItem returns the Go heap that what build returns, a structure of n
// items, keeps live per item, measured after a collection before and
// after it is built.
func PerItem(n int, build func() any) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v := build()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(v)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}
