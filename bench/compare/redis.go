package main

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fenced-dev/fenced/bench"
)

// Redis is the bench.System for a single Redis, with the single-instance
// lock pattern of the Redis documentation (the one redsync and Redlock
// apply to each instance) plus a fencing counter:
//
//   - acquire: one Lua script, SET lock:<name> <owner> NX PX <ttl> and, when
//     that succeeds, INCR lock:fence, whose value is the token (one
//     counter for every lock, so tokens rise globally like etcd's
//     revisions and ZooKeeper's zxids);
//   - release: a Lua compare-and-delete (only the owner's value is deleted);
//   - waiting: Redis has no queue or watch for this, so a waiter retries
//     after a random sleep between RetryMin and RetryMax;
//   - liveness: each locker refreshes the locks it holds every ttl/3 with a
//     compare-and-PEXPIRE script (redsync's Extend).
//
// One go-redis client, a connection pool of PoolSize connections, is
// shared by every locker, as an application would share it.
type Redis struct {
	rdb *redis.Client
	// RetryMin and RetryMax bound a waiter's random sleep between
	// attempts.
	RetryMin, RetryMax time.Duration
	// prefix keeps owner values of different Systems apart.
	prefix string
	next   atomic.Uint64
}

// Default retry sleep for waiters: 1–5 ms. redsync's default is 50–250 ms
// and Redlock's (node-redlock) 200 ms ± 200 ms; those would cap a handoff
// at a few grants per second per waiter, so the comparison gives Redis a
// far more aggressive poll (at the cost of more requests to the server).
const (
	DefaultRedisRetryMin = 1 * time.Millisecond
	DefaultRedisRetryMax = 5 * time.Millisecond
)

// RedisPoolSize is the shared client's connection pool: Redis connections
// carry one request at a time, so the pool is sized to the largest client
// count of the matrix (64) rather than go-redis's default of 10 per CPU.
const RedisPoolSize = 64

// NewRedis returns the System for the Redis at addr (host:port).
func NewRedis(addr string) (*Redis, error) {
	var b [6]byte
	_, _ = crand.Read(b[:])
	rdb := redis.NewClient(&redis.Options{
		Addr:         addr,
		PoolSize:     RedisPoolSize,
		DialTimeout:  5 * time.Second,
		ReadTimeout:  10 * time.Second,
		WriteTimeout: 10 * time.Second,
	})
	return &Redis{rdb: rdb, RetryMin: DefaultRedisRetryMin, RetryMax: DefaultRedisRetryMax, prefix: hex.EncodeToString(b[:])}, nil
}

// Name implements bench.System.
func (r *Redis) Name() string { return "redis" }

// Close implements bench.System.
func (r *Redis) Close() error { return r.rdb.Close() }

var (
	redisAcquire = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return 0`)
	redisRelease = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)
	redisExtend = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0`)
)

// redisFenceKey holds the fencing counter.
const redisFenceKey = "lock:fence"

// NewLocker implements bench.System: a holder whose locks expire ttl
// after their last refresh, refreshed every ttl/3.
func (r *Redis) NewLocker(ctx context.Context, id int, ttl time.Duration) (bench.Locker, error) {
	if ttl < 3*time.Millisecond {
		return nil, fmt.Errorf("redis: ttl %v too short", ttl)
	}
	l := &redisLocker{
		r:      r,
		ttl:    ttl,
		owner:  fmt.Sprintf("%s-%d", r.prefix, r.next.Add(1)),
		held:   map[string]string{},
		others: map[string]redisHeld{},
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	go l.refresh()
	return l, nil
}

// redisLocker is one holder: the locks it holds, each with the owner value
// of its grant, and the goroutine that refreshes them.
type redisLocker struct {
	r     *Redis
	ttl   time.Duration
	owner string
	n     atomic.Uint64
	mu    sync.Mutex
	held  map[string]string
	// others are the semaphore permits and read/write grants held, by
	// "sem:<name>" or "rw:<name>" (redis_semaphore.go).
	others map[string]redisHeld
	stop   chan struct{}
	done   chan struct{}
}

func (l *redisLocker) Lock(ctx context.Context, name string) (uint64, error) {
	value := fmt.Sprintf("%s-%d", l.owner, l.n.Add(1))
	keys := []string{"lock:" + name, redisFenceKey}
	for {
		token, err := redisAcquire.Run(ctx, l.r.rdb, keys, value, l.ttl.Milliseconds()).Int64()
		if err != nil {
			return 0, fmt.Errorf("redis acquire %s: %w", name, err)
		}
		if token > 0 {
			l.mu.Lock()
			l.held[name] = value
			l.mu.Unlock()
			return uint64(token), nil
		}
		d := l.r.RetryMin + rand.N(l.r.RetryMax-l.r.RetryMin+1)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		}
	}
}

// errRedisLost is returned by Unlock when the lock had expired.
var errRedisLost = errors.New("redis: the lock had expired and was no longer ours")

func (l *redisLocker) Unlock(ctx context.Context, name string) error {
	l.mu.Lock()
	value, ok := l.held[name]
	delete(l.held, name)
	l.mu.Unlock()
	if !ok {
		return fmt.Errorf("redis: %s is not held", name)
	}
	n, err := redisRelease.Run(ctx, l.r.rdb, []string{"lock:" + name}, value).Int64()
	if err != nil {
		return fmt.Errorf("redis release %s: %w", name, err)
	}
	if n == 0 {
		return errRedisLost
	}
	return nil
}

// refresh extends every held lock every ttl/3 until Close.
func (l *redisLocker) refresh() {
	defer close(l.done)
	tick := time.NewTicker(l.ttl / 3)
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
		l.mu.Lock()
		held := make(map[string]string, len(l.held))
		for k, v := range l.held {
			held[k] = v
		}
		var others []redisHeld
		for _, h := range l.others {
			others = append(others, h)
		}
		l.mu.Unlock()
		l.extendHeld(others)
		for name, value := range held {
			ctx, cancel := context.WithTimeout(context.Background(), l.ttl/3)
			_ = redisExtend.Run(ctx, l.r.rdb, []string{"lock:" + name}, value, l.ttl.Milliseconds()).Err()
			cancel()
		}
	}
}

func (l *redisLocker) Close() error {
	close(l.stop)
	<-l.done
	l.mu.Lock()
	held := l.held
	l.held = map[string]string{}
	var others []string
	for id := range l.others {
		others = append(others, id)
	}
	l.mu.Unlock()
	var errs []error
	for _, id := range others {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := l.releaseHeld(ctx, id); err != nil {
			errs = append(errs, err)
		}
		cancel()
	}
	for name, value := range held {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := redisRelease.Run(ctx, l.r.rdb, []string{"lock:" + name}, value).Err(); err != nil {
			errs = append(errs, err)
		}
		cancel()
	}
	return errors.Join(errs...)
}
