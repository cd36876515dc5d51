package redisgrant_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/redisgrant"
)

func TestLease_TokensIncreaseAcrossReleaseAndExpiry(t *testing.T) {
	g := redisgrant.New(newClient(t))
	name := uniqueName(t)
	var last fence.Token
	next := func(l *redisgrant.Lease) {
		t.Helper()
		if l.Token() <= last {
			t.Fatalf("Token()=%d after %d, want strictly greater", l.Token(), last)
		}
		last = l.Token()
	}
	for i := 0; i < 5; i++ {
		l := mustAcquire(t, g, name, time.Minute)
		next(l)
		if res, err := l.Release(ctx(t)); err != nil || res != redisgrant.Released {
			t.Fatalf("Release=%v, %v; want released", res, err)
		}
	}
	for i := 0; i < 3; i++ {
		// Not released: the next Acquire waits for Redis to expire it.
		l := mustAcquire(t, g, name, fence.MinTTL)
		next(l)
	}
	l := mustAcquire(t, g, name, time.Minute)
	next(l)
	g0 := l.Grant()
	if g0.Kind != fence.KindLock || g0.Scope != name || g0.Name != name || g0.Issuer == "" || g0.TTL != time.Minute {
		t.Fatalf("Grant()=%+v, want a lock grant of %q with an issuer and TTL 1m", g0, name)
	}
	if d := time.Since(g0.IssuedAt); d < -time.Minute || d > time.Minute {
		t.Fatalf("IssuedAt=%v is %v from now; want Redis's clock", g0.IssuedAt, d)
	}
}

func TestLease_AtMostOneHolder(t *testing.T) {
	g := redisgrant.New(newClient(t))
	name := uniqueName(t)
	const workers, rounds = 6, 20
	var inside atomic.Int32
	var mu sync.Mutex
	var tokens []fence.Token
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				l, err := g.Acquire(ctx(t), name, 30*time.Second)
				if err != nil {
					errs <- err
					return
				}
				if n := inside.Add(1); n != 1 {
					errs <- errors.New("two holders at once: " + strconv.Itoa(int(n)))
				}
				mu.Lock()
				tokens = append(tokens, l.Token())
				mu.Unlock()
				inside.Add(-1)
				if res, err := l.Release(ctx(t)); err != nil || res != redisgrant.Released {
					errs <- errors.New("release: " + res.String())
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
	if len(tokens) != workers*rounds {
		t.Fatalf("%d grants, want %d", len(tokens), workers*rounds)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("grant %d has token %d after %d: tokens in grant order must increase", i, tokens[i], tokens[i-1])
		}
	}
}

func TestLease_ReleaseOutcomes(t *testing.T) {
	g := redisgrant.New(newClient(t))
	name := uniqueName(t)

	l := mustAcquire(t, g, name, time.Minute)
	if res, err := l.Release(ctx(t)); err != nil || res != redisgrant.Released {
		t.Fatalf("first Release=%v, %v; want released", res, err)
	}
	if res, err := l.Release(ctx(t)); err != nil || res != redisgrant.AlreadyReleased {
		t.Fatalf("second Release=%v, %v; want already released", res, err)
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, redisgrant.ErrNotHeld) {
		t.Fatalf("Context cause=%v after Release, want ErrNotHeld", cause)
	}

	old := mustAcquire(t, g, name, fence.MinTTL)
	<-old.Done() // the client stops trusting it before Redis ends it
	if cause := context.Cause(old.Context()); !errors.Is(cause, fence.ErrLockLost) {
		t.Fatalf("Context cause=%v at ValidUntil, want fence.ErrLockLost", cause)
	}
	next := mustAcquire(t, g, name, time.Minute) // waits for Redis's expiry
	if res, err := old.Release(ctx(t)); err != nil || res != redisgrant.NotOwned {
		t.Fatalf("Release of an expired lease taken again=%v, %v; want not owned", res, err)
	}
	if ok, h, err := g.Verify(ctx(t), name, next.Token()); err != nil || !ok || h.Token != next.Token() {
		t.Fatalf("Verify(next)=%v, %+v, %v; the not-owned release must not free it", ok, h, err)
	}
}

func TestLease_RenewKeepsToken(t *testing.T) {
	rdb := newClient(t)
	g := redisgrant.New(rdb)
	name := uniqueName(t)
	l := mustAcquire(t, g, name, 400*time.Millisecond)
	if err := l.Renew(ctx(t), time.Minute); err != nil {
		t.Fatal(err)
	}
	if l.Remaining() < 30*time.Second {
		t.Fatalf("Remaining()=%v after a renewal for 1m", l.Remaining())
	}
	if _, err := g.TryAcquire(ctx(t), name, time.Minute); !errors.Is(err, fence.ErrNotGranted) {
		t.Fatalf("TryAcquire of a renewed lease=%v, want fence.ErrNotGranted", err)
	}
	if ok, h, err := g.Verify(ctx(t), name, l.Token()); err != nil || !ok || h.TTL < 30*time.Second {
		t.Fatalf("Verify=%v, %+v, %v; want the renewed lease in force with about 1m left", ok, h, err)
	}

	// A renewal that finds the lease gone in Redis loses it.
	if err := rdb.Del(ctx(t), "fenced:{"+name+"}:lease").Err(); err != nil {
		t.Fatal(err)
	}
	err := l.Renew(ctx(t), 0)
	wantIs(t, "Renew of a lease gone in Redis", err, fence.ErrLockLost)
	if !errors.Is(context.Cause(l.Context()), fence.ErrLockLost) {
		t.Fatalf("Context cause=%v, want fence.ErrLockLost", context.Cause(l.Context()))
	}
	if _, err := l.Release(ctx(t)); err != nil {
		t.Fatal(err)
	}
	wantIs(t, "Renew after Release", l.Renew(ctx(t), 0), redisgrant.ErrNotHeld)
	wantIs(t, "Renew with a ttl out of range", l.Renew(ctx(t), time.Millisecond), fence.ErrInvalidArgument)
}

func TestLease_TokensAbove2To53(t *testing.T) {
	rdb := newClient(t)
	g := redisgrant.New(rdb)
	name := uniqueName(t)
	const start = 1<<53 + 1 // a double cannot hold start+1
	if err := rdb.HSet(ctx(t), "fenced:{"+name+"}:counter", "token", strconv.FormatUint(start, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 3; i++ {
		l := mustAcquire(t, g, name, time.Minute)
		if want := fence.Token(start + i); l.Token() != want {
			t.Fatalf("Token()=%d, want %d exactly", l.Token(), want)
		}
		if ok, _, err := g.Verify(ctx(t), name, l.Token()); err != nil || !ok {
			t.Fatalf("Verify(%d)=%v, %v", l.Token(), ok, err)
		}
		if ok, _, _ := g.Verify(ctx(t), name, l.Token()+1); ok {
			t.Fatalf("Verify(%d) true for the holder of %d", l.Token()+1, l.Token())
		}
		l.Release(ctx(t))
	}
}

// counting counts the scripts a client runs (EVAL, EVALSHA).
type counting struct{ n atomic.Int64 }

func (c *counting) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *counting) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.count(cmd); return next(ctx, cmd) }
}
func (c *counting) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.count(cmd)
		}
		return next(ctx, cmds)
	}
}

func (c *counting) count(cmd redis.Cmder) {
	if n := cmd.Name(); n == "evalsha" || n == "eval" {
		c.n.Add(1)
	}
}

// waitSubscribed waits until someone subscribes to the lock's channel.
func waitSubscribed(t *testing.T, rdb *redis.Client, name string) {
	t.Helper()
	ch := "fenced:{" + name + "}:lease:released"
	for {
		n, err := rdb.PubSubNumSub(ctx(t), ch).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n[ch] > 0 {
			return
		}
		select {
		case <-ctx(t).Done():
			t.Fatal("nobody subscribed")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func TestAcquire_WokenByReleaseWithoutPolling(t *testing.T) {
	rdb := newClient(t)
	name := uniqueName(t)
	holder := mustAcquire(t, redisgrant.New(rdb), name, time.Hour)

	// The waiter re-checks on its own only once an hour, and the holder's
	// TTL is an hour: only the release's message can wake it.
	var sent counting
	wrdb := clientOf(t, redisAddr)
	wrdb.AddHook(&sent)
	waiter := redisgrant.New(wrdb, redisgrant.WithRecheck(time.Hour))
	got := make(chan *redisgrant.Lease, 1)
	go func() {
		l, err := waiter.Acquire(ctx(t), name, time.Minute)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	waitSubscribed(t, rdb, name)
	time.Sleep(300 * time.Millisecond) // a poll loop would show in the count
	before := sent.n.Load()
	released := time.Now()
	if _, err := holder.Release(ctx(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-got:
		if l == nil {
			return
		}
		if d := time.Since(released); d > 5*time.Second {
			t.Fatalf("waiter took %v after the release", d)
		}
		if l.Token() <= holder.Token() {
			t.Fatalf("waiter's token %d not above %d", l.Token(), holder.Token())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter was not woken by the release")
	}
	// While waiting it ran its check's probe and one try (each an EVALSHA,
	// and an EVAL the first time Redis lacks the script).
	if before > 4 {
		t.Fatalf("the waiter ran %d scripts before the release; a waiter must not poll", before)
	}
}

func TestAcquire_WokenByExpiry(t *testing.T) {
	rdb := newClient(t)
	name := uniqueName(t)
	holder := mustAcquire(t, redisgrant.New(rdb), name, 500*time.Millisecond)
	waiter := redisgrant.New(newClient(t), redisgrant.WithRecheck(time.Hour))
	start := time.Now()
	l, err := waiter.Acquire(ctx(t), name, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("waiter took %v for a holder whose TTL was 500ms; it must wake at the TTL Redis reported", d)
	}
	if l.Token() <= holder.Token() {
		t.Fatalf("token %d not above the expired holder's %d", l.Token(), holder.Token())
	}
}

func TestAcquire_CancelledWaitHoldsNothing(t *testing.T) {
	rdb := newClient(t)
	g := redisgrant.New(rdb)
	name := uniqueName(t)
	holder := mustAcquire(t, g, name, time.Minute)
	c, cancel := context.WithTimeout(ctx(t), 300*time.Millisecond)
	defer cancel()
	_, err := g.Acquire(c, name, time.Minute)
	wantIs(t, "Acquire with a context that ends", err, context.DeadlineExceeded)
	holder.Release(ctx(t))
	if n, _ := rdb.PubSubNumSub(ctx(t), "fenced:{"+name+"}:lease:released").Result(); n["fenced:{"+name+"}:lease:released"] != 0 {
		t.Fatalf("a cancelled waiter is still subscribed: %v", n)
	}
}
