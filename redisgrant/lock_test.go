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
		if res, err := l.Release(ctx(t)); err != nil || res != fence.Released {
			t.Fatalf("Release=%v, %v; want released", res, err)
		}
	}
	for i := 0; i < 3; i++ {
		// Not released and no longer renewed: the next Acquire waits for
		// Redis to expire it.
		next(abandoned(t, name, 300*time.Millisecond))
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

// abandoned returns a lease on name whose holder then stops renewing (its
// client is closed, as if the process died): Redis ends it after ttl.
func abandoned(t *testing.T, name string, ttl time.Duration) *redisgrant.Lease {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	l := mustAcquire(t, redisgrant.New(rdb), name, ttl)
	rdb.Close()
	return l
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
				l, err := g.Acquire(ctx(t), name, fence.Wait())
				if err != nil {
					errs <- err
					return
				}
				if n := inside.Add(1); n != 1 {
					errs <- errors.New("two holders at once: " + strconv.Itoa(int(n)))
				}
				mu.Lock()
				tokens = append(tokens, l.Grant().Token)
				mu.Unlock()
				inside.Add(-1)
				if res, err := l.Release(ctx(t)); err != nil || res != fence.Released {
					errs <- errors.New("release: " + string(res))
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
	rdb := newClient(t)
	g := redisgrant.New(rdb)
	name := uniqueName(t)

	l := mustAcquire(t, g, name, time.Minute)
	if res, err := l.Release(ctx(t)); err != nil || res != fence.Released {
		t.Fatalf("first Release=%v, %v; want released", res, err)
	}
	if res, err := l.Release(ctx(t)); err != nil || res != fence.AlreadyReleased {
		t.Fatalf("second Release=%v, %v; want already released", res, err)
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, fence.ErrReleased) {
		t.Fatalf("Context cause=%v after Release, want ErrNotHeld", cause)
	}

	old := mustAcquire(t, g, name, time.Minute)
	// Redis loses the lease (as when its TTL runs out): another owner takes
	// the lock, and the old holder learns it at its next renewal.
	rdb.Del(ctx(t), "fenced:{"+name+"}:lease")
	next := mustAcquire(t, g, name, time.Minute)
	wantIs(t, "Renew of a lease taken by another owner", old.Renew(ctx(t)), fence.ErrLockLost)
	if cause := context.Cause(old.Context()); !errors.Is(cause, fence.ErrLockLost) {
		t.Fatalf("Context cause=%v after a lost renewal, want fence.ErrLockLost", cause)
	}
	if res, err := old.Release(ctx(t)); err != nil || res != fence.NotOwned {
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
	// The background renewals (every TTL/3) keep it for many TTLs.
	select {
	case <-l.Done():
		t.Fatalf("lease ended while renewed: %v", l.Err())
	case <-time.After(2 * time.Second):
	}
	if err := l.Renew(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Acquire(ctx(t), name); !errors.Is(err, fence.ErrNotGranted) {
		t.Fatalf("Acquire of a renewed lease=%v, want fence.ErrNotGranted", err)
	}
	if ok, h, err := g.Verify(ctx(t), name, l.Token()); err != nil || !ok || h.Token != l.Token() {
		t.Fatalf("Verify=%v, %+v, %v; want the renewed lease in force with token %d", ok, h, err, l.Token())
	}

	// A renewal that finds the lease gone in Redis loses it.
	if err := rdb.Del(ctx(t), "fenced:{"+name+"}:lease").Err(); err != nil {
		t.Fatal(err)
	}
	err := l.Renew(ctx(t))
	wantIs(t, "Renew of a lease gone in Redis", err, fence.ErrLockLost)
	if !errors.Is(context.Cause(l.Context()), fence.ErrLockLost) || !errors.Is(l.Err(), fence.ErrLockLost) {
		t.Fatalf("Context cause=%v, Err=%v; want fence.ErrLockLost", context.Cause(l.Context()), l.Err())
	}
	if res, err := l.Release(ctx(t)); err != nil || res != fence.AlreadyReleased {
		t.Fatalf("Release of a lost lease=%v, %v; want already released", res, err)
	}
	wantIs(t, "Renew after Release", l.Renew(ctx(t)), fence.ErrReleased)
}

// Tokens come out exact across each way the acquire script writes them:
// '%d' below 2^31, '%.0f' below 2^53, read back as a string above.
func TestLease_TokensAbove2To53(t *testing.T) {
	rdb := newClient(t)
	g := redisgrant.New(rdb)
	for _, start := range []uint64{1<<31 - 2, 1<<53 - 2, 1<<53 + 1} { // a double cannot hold 2^53+2
		name := uniqueName(t) + "-" + strconv.FormatUint(start, 10)
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
			if res, err := l.Release(ctx(t)); err != nil || res != fence.Released {
				t.Fatalf("Release of token %d=%v, %v; want released", l.Token(), res, err)
			}
		}
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
		l, err := waiter.Acquire(ctx(t), name, fence.Wait(), fence.WithTTL(time.Minute))
		if err != nil {
			t.Error(err)
			got <- nil
			return
		}
		got <- l.(*redisgrant.Lease)
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
	// While waiting it ran its check's probe and two tries, one before
	// and one after it subscribed (each an EVALSHA; the holder had loaded
	// the scripts).
	if before > 4 {
		t.Fatalf("the waiter ran %d scripts before the release; a waiter must not poll", before)
	}
}

func TestAcquire_WokenByExpiry(t *testing.T) {
	name := uniqueName(t)
	holder := abandoned(t, name, 500*time.Millisecond)
	waiter := redisgrant.New(newClient(t), redisgrant.WithRecheck(time.Hour))
	start := time.Now()
	l, err := waiter.Acquire(ctx(t), name, fence.Wait(), fence.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("waiter took %v for a holder whose TTL was 500ms; it must wake at the TTL Redis reported", d)
	}
	if l.Grant().Token <= holder.Token() {
		t.Fatalf("token %d not above the expired holder's %d", l.Grant().Token, holder.Token())
	}
}

func TestAcquire_CancelledWaitHoldsNothing(t *testing.T) {
	rdb := newClient(t)
	g := redisgrant.New(rdb)
	name := uniqueName(t)
	holder := mustAcquire(t, g, name, time.Minute)
	c, cancel := context.WithTimeout(ctx(t), 300*time.Millisecond)
	defer cancel()
	_, err := g.Acquire(c, name, fence.Wait())
	wantIs(t, "Acquire with a context that ends", err, context.DeadlineExceeded)
	holder.Release(ctx(t))
	if n, _ := rdb.PubSubNumSub(ctx(t), "fenced:{"+name+"}:lease:released").Result(); n["fenced:{"+name+"}:lease:released"] != 0 {
		t.Fatalf("a cancelled waiter is still subscribed: %v", n)
	}
}
