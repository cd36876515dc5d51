package server

import (
	"math/rand/v2"
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
				renewOn(l, ps[id%streams], id)
			}
			return []any{l, p, ps}
		})
	}
	b.ReportMetric(per, "heap-B/session")
}

// BenchmarkRenewed_OnStream measures a keep-alive's renewal of one of a
// million sessions, in random order, on one of 8 streams: its expiry
// table entry and its registration for the revocation push.
func BenchmarkRenewed_OnStream(b *testing.B) {
	const n, streams = 1000000, 8
	l, _ := expiryOf(n, time.Minute)
	p := newRevokePush()
	ps := make([]*pushStream, streams)
	for i := range ps {
		ps[i] = p.stream()
	}
	order := rand.New(rand.NewPCG(1, 2)).Perm(n)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		id := uint64(order[i%n] + 1)
		renewOn(l, ps[id%streams], id)
		i++
	}
}

// renewOn renews session id on stream ps, as Server.renew does.
func renewOn(l *sessionExpiry, ps *pushStream, id uint64) {
	l.renew(id, ps.number())
}
