package server

import (
	"testing"
	"time"

	"github.com/fenced-dev/fenced/internal/heapcost"
)

// BenchmarkRenewed_HeapPerSession reports the Go heap the leader keeps
// live per session renewed on a KeepAlive stream: its expiry table entry
// and its registration for the revocation push, over 100k sessions
// renewed on 8 streams (docs/benchmarks.md, "The cost of scale").
func BenchmarkRenewed_HeapPerSession(b *testing.B) {
	const n, streams = 100000, 8
	var per float64
	for b.Loop() {
		per = heapcost.PerItem(n, func() any {
			l, _ := expiryOf(n, time.Minute)
			p := newRevokePush()
			ps := make([]*pushStream, streams)
			for i := range ps {
				ps[i] = p.stream()
			}
			for id := uint64(1); id <= n; id++ {
				l.renew(id, ps[id%streams].number())
			}
			return []any{l, p, ps}
		})
	}
	b.ReportMetric(per, "heap-B/session")
}
