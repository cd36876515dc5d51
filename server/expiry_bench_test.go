package server

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/internal/heapcost"
)

// BenchmarkSessionExpiry_HeapPerSession reports the Go heap the leader's
// expiry table (the table and its deadline heap) keeps live per session,
// over 100k sessions, after a collection (docs/benchmarks.md, "The cost
// of scale").
func BenchmarkSessionExpiry_HeapPerSession(b *testing.B) {
	const n = 100000
	var per float64
	for b.Loop() {
		per = heapcost.PerItem(n, func() any { l, _ := expiryOf(n, time.Minute); return l })
	}
	b.ReportMetric(per, "heap-B/session")
}

// BenchmarkSessionExpiry_Renew measures a keep-alive's renewal in the
// expiry table, the sessions renewed in random order as many streams
// renew them, and the heap work it leaves for due (each session's entry
// moved once per TTL): its cost should barely grow with the sessions.
func BenchmarkSessionExpiry_Renew(b *testing.B) {
	for _, n := range []int{1000, 1000000} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			l, clock := expiryOf(n, time.Minute)
			order := rand.New(rand.NewPCG(1, 2)).Perm(n)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, ok := l.renew(uint64(order[i%n]+1), 0); !ok {
					b.Fatal("renew failed")
				}
				if i++; i%n == 0 {
					// A third of the TTL later every session was renewed
					// once; after three rounds each entry is due once.
					clock.advance(20 * time.Second)
					l.due()
				}
			}
		})
	}
}
