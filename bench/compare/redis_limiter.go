package main

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/fenced-dev/fenced/bench"
)

// redisTokenBucket is the token bucket users write for Redis: one Lua
// script per take, on the server's clock (TIME, so that clients' clocks
// do not matter), the level and its time in one hash. KEYS: the bucket.
// ARGV: capacity, refill per second, permits. It returns 1 when the
// permits were taken.
var redisTokenBucket = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local capacity, rate, n = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local b = redis.call('HMGET', KEYS[1], 'level', 'at')
local level, at = tonumber(b[1]), tonumber(b[2])
if level == nil then level, at = capacity, now end
if now > at then level = math.min(capacity, level + (now - at) * rate / 1000000) end
local ok = 0
if level >= n then level, ok = level - n, 1 end
redis.call('HSET', KEYS[1], 'level', string.format('%.6f', level), 'at', math.max(now, at))
return ok`)

var _ bench.LimiterSystem = (*Redis)(nil)

// NewLimiters implements bench.LimiterSystem: every handle runs the
// script on the shared client, one permit per call (the script could take
// more, but then the batching is the client's to write; refused).
func (r *Redis) NewLimiters(ctx context.Context, name string, capacity, ratePerS uint64, n, batch int) ([]bench.Limiter, error) {
	if batch > 1 {
		return nil, fmt.Errorf("redis: the Lua token bucket takes one permit per call; batch %d is not built", batch)
	}
	out := make([]bench.Limiter, n)
	for i := range out {
		out[i] = redisLimiter{rdb: r.rdb, key: "limiter:" + name, capacity: capacity, rate: ratePerS}
	}
	return out, nil
}

type redisLimiter struct {
	rdb            *redis.Client
	key            string
	capacity, rate uint64
}

// Allow implements bench.Limiter.
func (l redisLimiter) Allow(ctx context.Context) (bool, error) {
	ok, err := redisTokenBucket.Run(ctx, l.rdb, []string{l.key}, l.capacity, l.rate, 1).Int64()
	if err != nil {
		return false, fmt.Errorf("redis token bucket %s: %w", l.key, err)
	}
	return ok == 1, nil
}
