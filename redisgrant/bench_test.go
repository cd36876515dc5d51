package redisgrant_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/redisgrant"
)

// The bare single-instance pattern the issue compares against: SET NX PX
// and INCR of a fencing counter in one script, compare-and-delete to
// release (bench/compare's "redis" system).
var (
	bareAcquire = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return 0`)
	bareRelease = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)
)

// BenchmarkLockCycle measures uncontended acquire+release cycles, each
// goroutine on a name of its own, of the Redis grantor beside the bare
// SET NX PX script, on one redis-server:
//
//	go test -run '^$' -bench LockCycle -benchtime 3s ./redisgrant
//
// Besides ns/op it reports server-µs/op, the time redis-server spent in
// the cycle's scripts (INFO commandstats of EVAL and EVALSHA), which a
// loaded machine disturbs less than the wall clock.
func BenchmarkLockCycle(b *testing.B) {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, PoolSize: 64})
	defer rdb.Close()
	var ids atomic.Int64
	b.Run("redisgrant", func(b *testing.B) {
		g := redisgrant.New(rdb)
		defer reportServerTime(b, rdb)()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			name := fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), ids.Add(1))
			for pb.Next() {
				h, err := g.Acquire(ctx, name, fence.WithTTL(10*time.Second))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := h.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("bare-setnx", func(b *testing.B) {
		defer reportServerTime(b, rdb)()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			id := ids.Add(1)
			keys := []string{fmt.Sprintf("bare:{%d}:lock", id), fmt.Sprintf("bare:{%d}:fence", id)}
			var n int64
			for pb.Next() {
				n++
				owner := fmt.Sprintf("%d-%d", id, n)
				tok, err := bareAcquire.Run(ctx, rdb, keys, owner, 10000).Int64()
				if err != nil || tok == 0 {
					b.Fatal(tok, err)
				}
				if err := bareRelease.Run(ctx, rdb, keys[:1], owner).Err(); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

// reportServerTime resets redis-server's command statistics and returns a
// function that reports the microseconds the server spent in scripts per
// op as the metric server-µs/op.
func reportServerTime(b *testing.B, rdb *redis.Client) func() {
	ctx := context.Background()
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	return func() {
		info, err := rdb.Info(ctx, "commandstats").Result()
		if err != nil {
			b.Fatal(err)
		}
		var usec float64
		for _, line := range strings.Split(info, "\n") {
			if !strings.HasPrefix(line, "cmdstat_eval:") && !strings.HasPrefix(line, "cmdstat_evalsha:") {
				continue
			}
			for _, f := range strings.Split(strings.TrimSpace(line[strings.IndexByte(line, ':')+1:]), ",") {
				if v, ok := strings.CutPrefix(f, "usec="); ok {
					n, _ := strconv.ParseFloat(v, 64)
					usec += n
				}
			}
		}
		b.ReportMetric(usec/float64(b.N), "server-µs/op")
	}
}
