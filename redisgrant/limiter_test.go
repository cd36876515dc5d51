package redisgrant_test

import (
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/redisgrant"
)

// redisNow reads Redis's clock.
func redisNow(t *testing.T, rdb *redis.Client) time.Time {
	t.Helper()
	now, err := rdb.Time(ctx(t)).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now
}

func TestLimiter_FixedWindowOnRedisClock(t *testing.T) {
	rdb := newClient(t)
	g := redisgrant.New(rdb)
	// An hour-long window: the few calls below do not straddle a boundary
	// (unless they run within milliseconds of a full hour).
	l := g.NewFixedWindow(uniqueName(t), 4, time.Hour, redisgrant.WithMaxDelay(2*time.Hour))
	for i := 0; i < 4; i++ {
		if ok, err := l.Allow(ctx(t)); err != nil || !ok {
			t.Fatalf("Allow %d=%v, %v; want true", i, ok, err)
		}
	}
	if ok, err := l.Allow(ctx(t)); err != nil || ok {
		t.Fatalf("fifth Allow=%v, %v; want false", ok, err)
	}
	// The next window starts at the next full hour of Redis's clock.
	r, err := l.Reserve(ctx(t))
	if err != nil || !r.OK() {
		t.Fatalf("Reserve=%+v, %v", r, err)
	}
	now := redisNow(t, rdb)
	want := now.Truncate(time.Hour).Add(time.Hour).Sub(now)
	if d := r.Delay(); math.Abs(float64(d-want)) > float64(2*time.Second) {
		t.Fatalf("Delay()=%v, want about %v (to the next window on Redis's clock)", d, want)
	}
	// Beyond the max delay nothing is booked.
	short := g.NewFixedWindow(uniqueName(t), 1, time.Hour, redisgrant.WithMaxDelay(time.Second))
	short.Allow(ctx(t))
	if r, err := short.Reserve(ctx(t)); err != nil || r.OK() || r.Delay() != 0 {
		t.Fatalf("Reserve past the max delay=%+v, %v; want not OK", r, err)
	}
}

// concurrent runs workers×each WaitN(1) calls on limiters made by mk (one
// Grantor each) and returns how long they all took.
func concurrent(t *testing.T, workers, each int, mk func(*redisgrant.Grantor) *redisgrant.Limiter) time.Duration {
	t.Helper()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		l := mk(redisgrant.New(clientOf(t, redisAddr)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if err := l.Wait(ctx(t)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return time.Since(start)
}

func TestLimiter_SlidingWindow(t *testing.T) {
	rdb := newClient(t)
	g := redisgrant.New(rdb)
	name := uniqueName(t)
	l := g.NewSlidingWindow(name, 3, time.Second)
	for i := 0; i < 3; i++ {
		if ok, err := l.Allow(ctx(t)); err != nil || !ok {
			t.Fatalf("Allow %d=%v, %v", i, ok, err)
		}
	}
	if ok, _ := l.Allow(ctx(t)); ok {
		t.Fatal("fourth Allow within the window was true")
	}
	r, err := l.Reserve(ctx(t))
	if err != nil || !r.OK() || r.Delay() < 500*time.Millisecond || r.Delay() > time.Second {
		t.Fatalf("Reserve=%v (delay %v), %v; want OK, about 1s after the first event", r.OK(), r.Delay(), err)
	}
	wantIs(t, "WaitN above the limit", l.WaitN(ctx(t), 4), fence.ErrInvalidArgument)
	big := g.NewSlidingWindow(name+"-big", 50000, time.Minute)
	if ok, err := big.AllowN(ctx(t), 50000); err != nil || !ok {
		t.Fatalf("AllowN(50000) of a window of 50000=%v, %v", ok, err)
	}
	if ok, err := big.Allow(ctx(t)); err != nil || ok {
		t.Fatalf("Allow after the window filled=%v, %v; want false", ok, err)
	}

	// 20 events from 4 clients, 5 per 400ms: at least 3 windows pass
	// between the first five and the last five.
	took := concurrent(t, 4, 5, func(g *redisgrant.Grantor) *redisgrant.Limiter {
		return g.NewSlidingWindow(name+"-shared", 5, 400*time.Millisecond)
	})
	if took < 1200*time.Millisecond || took > 30*time.Second {
		t.Fatalf("20 events at 5 per 400ms took %v; want at least 1.2s", took)
	}
}

func TestLimiter_TokenBucket(t *testing.T) {
	g := redisgrant.New(newClient(t))
	name := uniqueName(t)
	l := g.NewTokenBucket(name, 10, 5)
	if ok, err := l.AllowN(ctx(t), 5); err != nil || !ok {
		t.Fatalf("AllowN(5) of a full bucket=%v, %v", ok, err)
	}
	if ok, _ := l.Allow(ctx(t)); ok {
		t.Fatal("Allow of an empty bucket was true")
	}
	r, err := l.Reserve(ctx(t))
	if err != nil || !r.OK() || r.Delay() > 150*time.Millisecond {
		t.Fatalf("Reserve=%v (delay %v), %v; want OK within about 100ms", r.OK(), r.Delay(), err)
	}
	if ok, _ := l.AllowN(ctx(t), 6); ok {
		t.Fatal("AllowN above the burst was true")
	}
	wantIs(t, "WaitN above the burst", l.WaitN(ctx(t), 6), fence.ErrInvalidArgument)

	// 20 events from 4 clients at 10/s with a burst of 5: 15 wait for
	// the refill, 1.5s.
	took := concurrent(t, 4, 5, func(g *redisgrant.Grantor) *redisgrant.Limiter {
		return g.NewTokenBucket(name+"-shared", 10, 5)
	})
	if took < 1400*time.Millisecond || took > 30*time.Second {
		t.Fatalf("20 events at 10/s, burst 5, took %v; want about 1.5s", took)
	}
}

func TestLimiter_WaitRespectsDeadline(t *testing.T) {
	g := redisgrant.New(newClient(t))
	l := g.NewFixedWindow(uniqueName(t), 1, time.Hour, redisgrant.WithMaxDelay(2*time.Hour))
	l.Allow(ctx(t))
	c, cancel := contextWithTimeout(t, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := l.Wait(c)
	if !errors.Is(err, fence.ErrNotGranted) || time.Since(start) > 5*time.Second {
		t.Fatalf("Wait that cannot finish by the deadline=%v after %v; want fence.ErrNotGranted at once", err, time.Since(start))
	}
}

func TestLimiter_BadInputWritesNothing(t *testing.T) {
	r := startRedis(t, "--save", "", "--appendonly", "no")
	rdb := clientOf(t, r.Addr)
	g := redisgrant.New(rdb)
	for what, l := range map[string]*redisgrant.Limiter{
		"fixed n 0":           g.NewFixedWindow("x", 0, time.Second),
		"fixed window 0":      g.NewFixedWindow("x", 1, 0),
		"sliding window 25h":  g.NewSlidingWindow("x", 1, 25*time.Hour),
		"sliding n too large": g.NewSlidingWindow("x", redisgrant.MaxLimit+1, time.Second),
		"bucket rate 0":       g.NewTokenBucket("x", 0, 1),
		"bucket rate NaN":     g.NewTokenBucket("x", math.NaN(), 1),
		"bucket burst 0":      g.NewTokenBucket("x", 1, 0),
		"max delay negative":  g.NewTokenBucket("x", 1, 1, redisgrant.WithMaxDelay(-time.Second)),
		"bad name":            g.NewTokenBucket("", 1, 1),
	} {
		_, err := l.Allow(ctx(t))
		wantIs(t, what, err, fence.ErrInvalidArgument)
	}
	_, err := g.NewTokenBucket("x", 1, 1).AllowN(ctx(t), 0)
	wantIs(t, "AllowN(0)", err, fence.ErrInvalidArgument)
	wantNothingWritten(t, rdb)
}
