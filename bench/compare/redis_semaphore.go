package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis has no semaphore or read/write lock; these are the script
// recipes a user would write after the Redis documentation's lock pattern
// (https://redis.io/docs/latest/develop/use/patterns/distributed-locks/)
// and the counting semaphore of "Redis in Action" §6.3 (a sorted set of
// holders scored by their expiry, stale holders trimmed before counting),
// each acquire and release one Lua script, the token the same global
// INCR counter as the lock's. Waiters poll with the lock's random
// RetryMin–RetryMax sleep (no queue: not fair), and each holder's refresh
// goroutine pushes its expiries forward every TTL/3.
var (
	// KEYS: sem:<name>, fence. ARGV: owner, ttl ms, capacity.
	redisSemAcquire = redis.NewScript(`
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
  return redis.call('INCR', KEYS[2])
end
return 0`)
	// KEYS: a sorted set of holders. ARGV: owner.
	redisZRelease = redis.NewScript(`return redis.call('ZREM', KEYS[1], ARGV[1])`)
	// KEYS: a sorted set of holders. ARGV: owner, ttl ms.
	redisZExtend = redis.NewScript(`
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
return redis.call('ZADD', KEYS[1], 'XX', 'CH', now + tonumber(ARGV[2]), ARGV[1])`)
	// KEYS: rw:<name>:w, rw:<name>:r, fence. ARGV: owner, ttl ms, "1"
	// for write. A writer holds the string key (PX), readers are the
	// sorted set; a writer waits for both to be empty, a reader for the
	// writer key to be absent (readers first: writers can starve).
	redisRWAcquire = redis.NewScript(`
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if ARGV[3] == '1' then
  if redis.call('ZCARD', KEYS[2]) > 0 then return 0 end
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
else
  redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
end
return redis.call('INCR', KEYS[3])`)
)

// redisHeld is one grant of a semaphore or read/write lock: its key, the
// owner value, and whether the key is a sorted set of holders.
type redisHeld struct {
	key, value string
	zset       bool
}

// poll runs try until it returns a token, sleeping RetryMin–RetryMax
// between attempts.
func (l *redisLocker) poll(ctx context.Context, what string, try func() (int64, error)) (uint64, error) {
	for {
		token, err := try()
		if err != nil {
			return 0, fmt.Errorf("redis %s: %w", what, err)
		}
		if token > 0 {
			return uint64(token), nil
		}
		t := time.NewTimer(l.r.RetryMin + rand.N(l.r.RetryMax-l.r.RetryMin+1))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		}
	}
}

func (l *redisLocker) AcquirePermit(ctx context.Context, name string, capacity int) (uint64, int, error) {
	value := fmt.Sprintf("%s-%d", l.owner, l.n.Add(1))
	keys := []string{"sem:" + name, redisFenceKey}
	tok, err := l.poll(ctx, "semaphore "+name, func() (int64, error) {
		return redisSemAcquire.Run(ctx, l.r.rdb, keys, value, l.ttl.Milliseconds(), capacity).Int64()
	})
	if err != nil {
		return 0, -1, err
	}
	l.hold("sem:"+name, redisHeld{key: keys[0], value: value, zset: true})
	return tok, -1, nil
}

func (l *redisLocker) ReleasePermit(ctx context.Context, name string) error {
	return l.releaseHeld(ctx, "sem:"+name)
}

func (l *redisLocker) RWLock(ctx context.Context, name string, write bool) (uint64, error) {
	value := fmt.Sprintf("%s-%d", l.owner, l.n.Add(1))
	keys := []string{"rw:" + name + ":w", "rw:" + name + ":r", redisFenceKey}
	w := "0"
	if write {
		w = "1"
	}
	tok, err := l.poll(ctx, "rwlock "+name, func() (int64, error) {
		return redisRWAcquire.Run(ctx, l.r.rdb, keys, value, l.ttl.Milliseconds(), w).Int64()
	})
	if err != nil {
		return 0, err
	}
	h := redisHeld{key: keys[1], value: value, zset: true}
	if write {
		h = redisHeld{key: keys[0], value: value}
	}
	l.hold("rw:"+name, h)
	return tok, nil
}

func (l *redisLocker) RWUnlock(ctx context.Context, name string) error {
	return l.releaseHeld(ctx, "rw:"+name)
}

func (l *redisLocker) hold(id string, h redisHeld) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.others[id] = h
}

// releaseHeld releases the grant id with the script matching its key.
func (l *redisLocker) releaseHeld(ctx context.Context, id string) error {
	l.mu.Lock()
	h, ok := l.others[id]
	delete(l.others, id)
	l.mu.Unlock()
	if !ok {
		return fmt.Errorf("redis: %s is not held", id)
	}
	script := redisRelease
	if h.zset {
		script = redisZRelease
	}
	n, err := script.Run(ctx, l.r.rdb, []string{h.key}, h.value).Int64()
	if err != nil {
		return fmt.Errorf("redis release %s: %w", id, err)
	}
	if n == 0 {
		return errRedisLost
	}
	return nil
}

// extendHeld pushes the expiry of every grant in held forward by the TTL.
func (l *redisLocker) extendHeld(held []redisHeld) {
	for _, h := range held {
		ctx, cancel := context.WithTimeout(context.Background(), l.ttl/3)
		script := redisExtend
		if h.zset {
			script = redisZExtend
		}
		_ = script.Run(ctx, l.r.rdb, []string{h.key}, h.value, l.ttl.Milliseconds()).Err()
		cancel()
	}
}
