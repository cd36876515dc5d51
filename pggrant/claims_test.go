package pggrant_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/pggrant"
	"github.com/fenced-dev/fenced/postgres"
)

func newQueue(t *testing.T, g *pggrant.Grantor, opts ...pggrant.QueueOption) *pggrant.Queue {
	t.Helper()
	q, err := g.Queue(fmt.Sprintf("q-%d", time.Now().UnixNano()), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// Workers claiming concurrently each get a different item (SKIP LOCKED),
// every item exactly once; the producer's key de-duplicates.
func TestQueue_ConcurrentClaims(t *testing.T) {
	ctx := testCtx(t)
	g := open(t, pgAddr())
	q := newQueue(t, g)
	const items = 40
	for i := range items {
		if added, err := q.Enqueue(ctx, fmt.Sprintf("item-%02d", i), []byte{byte(i)}); err != nil || !added {
			t.Fatalf("enqueue: %v, %v", added, err)
		}
	}
	if added, err := q.Enqueue(ctx, "item-00", []byte("again")); err != nil || added {
		t.Fatalf("enqueue of an existing key = %v, %v; want false", added, err)
	}
	var (
		mu   sync.Mutex
		seen = map[string]int{}
		wg   sync.WaitGroup
	)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, err := q.Claim(ctx)
				if errors.Is(err, fence.ErrNotGranted) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				seen[c.Item()]++
				mu.Unlock()
				if c.Grant().Kind != fence.KindClaim || c.Grant().Scope != q.Name()+"/"+c.Item() {
					t.Errorf("claim grant %+v", c.Grant())
				}
				if err := c.Ack(ctx); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if len(seen) != items {
		t.Fatalf("%d items claimed; want %d", len(seen), items)
	}
	for item, n := range seen {
		if n != 1 {
			t.Errorf("%s claimed %d times", item, n)
		}
	}
}

// An expired claim returns the item; the next claim has a higher token;
// the old claim's Ack fails with ErrLockLost and its write is rejected
// by the postgres guard for the item's scope.
func TestQueue_ExpiredClaimFenced(t *testing.T) {
	ctx := testCtx(t)
	g := open(t, pgAddr())
	pool := pgxPool(t)
	guard := postgres.New(pool)
	if err := guard.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	q := newQueue(t, g)
	if _, err := q.Enqueue(ctx, "job", []byte("payload")); err != nil {
		t.Fatal(err)
	}
	c1, err := q.Claim(ctx, fence.WithTTL(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if string(c1.Payload()) != "payload" || c1.Deliveries() != 1 {
		t.Fatalf("claim: payload %q, deliveries %d", c1.Payload(), c1.Deliveries())
	}
	if err := guard.Check(ctx, c1.Grant().Scope, c1.Grant().Token); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Claim(ctx); !errors.Is(err, fence.ErrNotGranted) {
		t.Fatalf("claim while the only item is claimed = %v; want ErrNotGranted", err)
	}
	c2, err := q.Claim(ctx, fence.Wait()) // woken at the claim's expiry
	if err != nil {
		t.Fatal(err)
	}
	if c2.Item() != "job" || c2.Grant().Token <= c1.Grant().Token || c2.Deliveries() != 2 {
		t.Fatalf("reclaim: item %q token %d deliveries %d; want job, above %d, 2", c2.Item(), c2.Grant().Token, c2.Deliveries(), c1.Grant().Token)
	}
	if err := guard.Check(ctx, c2.Grant().Scope, c2.Grant().Token); err != nil {
		t.Fatal(err)
	}
	for op, f := range map[string]func() error{
		"ack":    func() error { return c1.Ack(ctx) },
		"nack":   func() error { return c1.Nack(ctx) },
		"extend": func() error { return c1.Extend(ctx, time.Second) },
	} {
		if err := f(); !errors.Is(err, fence.ErrLockLost) {
			t.Errorf("%s of the expired claim = %v; want fence.ErrLockLost", op, err)
		}
	}
	if err := guard.Check(ctx, c1.Grant().Scope, c1.Grant().Token); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("the expired claim's write = %v; want a stale token", err)
	}
	if err := c2.Extend(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c2.Extend(ctx, time.Millisecond); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Fatalf("extend by 1ms = %v; want ErrInvalidArgument", err)
	}
	if err := c2.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Claim(ctx); !errors.Is(err, fence.ErrNotGranted) {
		t.Fatalf("claim after the ack = %v; want ErrNotGranted", err)
	}
}

// An item nacked or expired MaxDeliveries times becomes a dead letter.
func TestQueue_DeadLetter(t *testing.T) {
	ctx := testCtx(t)
	g := open(t, pgAddr())
	q := newQueue(t, g, pggrant.WithMaxDeliveries(2))
	if _, err := q.Enqueue(ctx, "poison", nil); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		c, err := q.Claim(ctx)
		if err != nil {
			t.Fatalf("delivery %d: %v", i+1, err)
		}
		if err := c.Nack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.Claim(ctx); !errors.Is(err, fence.ErrNotGranted) {
		t.Fatalf("claim after the last delivery = %v; want ErrNotGranted", err)
	}
	if dead, err := q.DeadLetters(ctx); err != nil || len(dead) != 1 || dead[0] != "poison" {
		t.Fatalf("dead letters = %v, %v", dead, err)
	}
	if _, err := g.Queue("q", pggrant.WithMaxDeliveries(0)); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Fatalf("max deliveries 0 = %v; want ErrInvalidArgument", err)
	}
}

// A waiting claimer is woken by Enqueue's notification, far sooner than
// the re-check interval.
func TestQueue_ClaimWokenByEnqueue(t *testing.T) {
	ctx := testCtx(t)
	g := open(t, pgAddr(), pggrant.WithRecheck(30*time.Second))
	q := newQueue(t, g)
	type result struct {
		c   *pggrant.Claim
		at  time.Time
		err error
	}
	got := make(chan result, 1)
	go func() {
		c, err := q.Claim(ctx, fence.Wait())
		got <- result{c, time.Now(), err}
	}()
	time.Sleep(300 * time.Millisecond) // let the claimer start waiting
	at := time.Now()
	if _, err := q.Enqueue(ctx, "wake", nil); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	if d := r.at.Sub(at); d > 5*time.Second {
		t.Fatalf("claimer woken %v after the enqueue; want well within the 30s re-check", d)
	}
	r.c.Ack(ctx)
}

// An item whose claims all expire becomes a dead letter after
// MaxDeliveries deliveries, like one nacked that often.
func TestQueue_DeadLetterByExpiry(t *testing.T) {
	ctx := testCtx(t)
	g := open(t, pgAddr())
	q := newQueue(t, g, pggrant.WithMaxDeliveries(2))
	if _, err := q.Enqueue(ctx, "slow", nil); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		c, err := q.Claim(ctx, fence.WithTTL(100*time.Millisecond), fence.Wait())
		if err != nil || c.Deliveries() != i+1 {
			t.Fatalf("delivery %d: %v", i+1, err)
		}
	}
	time.Sleep(200 * time.Millisecond) // past the second claim's 100ms TTL
	if _, err := q.Claim(ctx); !errors.Is(err, fence.ErrNotGranted) {
		t.Fatalf("claim after the last delivery expired = %v; want ErrNotGranted", err)
	}
	if dead, err := q.DeadLetters(ctx); err != nil || len(dead) != 1 || dead[0] != "slow" {
		t.Fatalf("dead letters = %v, %v", dead, err)
	}
}
