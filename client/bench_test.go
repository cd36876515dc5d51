package client_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/testserver"
)

// BenchmarkAcquireRelease measures uncontended lock cycles end to end
// against a single-node server (each TryLock and Unlock is a Raft commit
// with fsync): every client has its own session and lock name and runs
// TryLock -> Token -> Unlock. Reported: cycles/s over all clients and the
// p50/p99 latency of one cycle.
//
//	go test -run '^$' -bench AcquireRelease -benchtime 3s ./client/
//
// With FENCED_BENCH_ENDPOINTS=a,b,c it runs against that cluster instead
// of an in-process single node.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, clients := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			endpoints := strings.Split(os.Getenv("FENCED_BENCH_ENDPOINTS"), ",")
			if endpoints[0] == "" {
				endpoints = []string{testserver.Start(b).Addr()}
			}
			c, err := client.New(endpoints)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			mutexes := make([]*client.Mutex, clients)
			for i := range mutexes {
				s, err := c.NewSession(ctx, client.WithTTL(30*time.Second))
				if err != nil {
					b.Fatal(err)
				}
				mutexes[i] = client.NewMutex(s, fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), i))
			}
			var (
				mu        sync.Mutex
				latencies []time.Duration
				next      = make(chan struct{}, b.N)
				wg        sync.WaitGroup
			)
			for i := 0; i < b.N; i++ {
				next <- struct{}{}
			}
			close(next)
			b.ResetTimer()
			start := time.Now()
			for _, m := range mutexes {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var mine []time.Duration
					for range next {
						t0 := time.Now()
						if err := m.TryLock(ctx); err != nil {
							b.Error(err)
							return
						}
						_ = m.Token()
						if err := m.Unlock(ctx); err != nil {
							b.Error(err)
							return
						}
						mine = append(mine, time.Since(t0))
					}
					mu.Lock()
					latencies = append(latencies, mine...)
					mu.Unlock()
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
			if n := len(latencies); n > 0 {
				b.ReportMetric(float64(n)/elapsed.Seconds(), "cycles/s")
				b.ReportMetric(float64(latencies[n/2].Microseconds())/1000, "p50_ms")
				b.ReportMetric(float64(latencies[n*99/100].Microseconds())/1000, "p99_ms")
			}
		})
	}
}
