package redisgrant_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/internal/testdb"
	"github.com/fenced-dev/fenced/redisgrant"
)

// On Redis Cluster (a real cluster-mode server, which refuses a script
// whose keys are in two slots) every operation runs: each name's keys
// share its hash tag's slot, and release messages reach waiters.
func TestGrantor_OnRedisCluster(t *testing.T) {
	r, err := testdb.StartRedisCluster()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{r.Addr}})
	t.Cleanup(func() { rdb.Close() })
	g := redisgrant.New(rdb, redisgrant.WithRecheck(time.Hour))
	name := uniqueName(t)

	h, err := g.Acquire(ctx(t), name, fence.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan fence.Held, 1)
	go func() {
		w, err := g.Acquire(ctx(t), name, fence.Wait())
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	time.Sleep(200 * time.Millisecond)
	if res, err := h.Release(ctx(t)); err != nil || res != fence.Released {
		t.Fatalf("Release=%v, %v", res, err)
	}
	select {
	case w := <-got:
		if w == nil {
			return
		}
		if w.Grant().Token <= h.Grant().Token {
			t.Fatalf("waiter's token %d not above %d", w.Grant().Token, h.Grant().Token)
		}
		if err := w.Verify(ctx(t)); err != nil {
			t.Fatal(err)
		}
		w.Release(ctx(t))
	case <-time.After(20 * time.Second):
		t.Fatal("the waiter was not woken on the cluster (recheck 1h)")
	}

	p, err := g.NewSemaphore(name, 2, time.Minute).TryAcquire(ctx(t), 2)
	if err != nil {
		t.Fatal(err)
	}
	p.Release(ctx(t))
	if ok, err := g.NewSlidingWindow(name, 1, time.Minute).Allow(ctx(t)); err != nil || !ok {
		t.Fatalf("sliding window Allow=%v, %v", ok, err)
	}

	// The grantor's hash slots are Redis's.
	for _, k := range []string{"a", "orders", "{user:1}:cart", "x{}y", "{}{a}", "fenced:{" + name + "}:lease", "a{b{c}d}"} {
		want, err := rdb.ClusterKeySlot(ctx(t), k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := redisgrant.KeySlot(k); int64(got) != want {
			t.Fatalf("KeySlot(%q)=%d, Redis says %d", k, got, want)
		}
	}

	// A layout that splits a name's keys over two slots is refused before
	// Redis sees it.
	split := redisgrant.New(rdb, redisgrant.WithKeys(func(name, part string) string { return part + ":" + name }))
	_, err = split.Acquire(context.Background(), name)
	if !errors.Is(err, redisgrant.ErrCrossSlot) {
		t.Fatalf("Acquire with keys in two slots on a cluster=%v, want ErrCrossSlot", err)
	}
	if n, _ := rdb.Exists(ctx(t), "lease:"+name, "counter:"+name).Result(); n != 0 {
		t.Fatalf("%d keys of the refused layout exist", n)
	}
}
