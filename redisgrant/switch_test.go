package redisgrant_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/testserver"
	"github.com/fenced-dev/fenced/redisfence"
	"github.com/fenced-dev/fenced/redisgrant"
)

// writeReport is the application's code, written against fence.Grantor
// alone: it takes the lock and writes through the guard with the grant's
// token. It does not change when the grantor does.
func writeReport(ctx context.Context, g fence.Grantor, guard *redisfence.Guard, key, value string) (fence.Held, error) {
	h, err := g.Acquire(ctx, key, fence.Wait())
	if err != nil {
		return nil, err
	}
	return h, guard.Set(ctx, key, h.Grant().Token, value, 0)
}

// A live name moves from the Redis grantor to the fenced server started
// with --token-floor at Redis's highest token (MaxToken): the same
// application code, with only the constructor changed, gets a token above
// every Redis token; the guard accepts the new holder and rejects the old
// one, which still holds its Redis lease.
func TestSwitch_RedisToServer(t *testing.T) {
	r := startRedis(t, "--save", "", "--appendonly", "no")
	rdb := clientOf(t, r.Addr)
	guard := redisfence.New(rdb)
	key := fmt.Sprintf("report-%d", time.Now().UnixNano())

	// Before: the application runs on Redis.
	var g fence.Grantor = redisgrant.New(rdb)
	for i := range 3 {
		h, err := writeReport(ctx(t), g, guard, key, fmt.Sprintf("redis %d", i))
		if err != nil {
			t.Fatal(err)
		}
		h.Release(ctx(t))
	}
	old, err := writeReport(ctx(t), g, guard, key, "redis, still held")
	if err != nil {
		t.Fatal(err)
	}
	floor, err := g.(*redisgrant.Grantor).MaxToken(ctx(t))
	if err != nil || floor < old.Grant().Token {
		t.Fatalf("MaxToken=%d, %v; want at least %d", floor, err, old.Grant().Token)
	}

	// After: the server with the floor, one constructor changed.
	srv := testserver.Start(t, testserver.WithTokenFloor(floor))
	c, err := client.New([]string{srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g = client.NewGrantor(c)
	h, err := writeReport(ctx(t), g, guard, key, "server")
	if err != nil {
		t.Fatalf("the new holder's write through the guard: %v", err)
	}
	if h.Grant().Token <= floor {
		t.Fatalf("server token %d not above the floor %d", h.Grant().Token, floor)
	}
	if err := old.Verify(ctx(t)); err != nil {
		t.Fatalf("the old Redis lease: %v; want still held (the move does not end it)", err)
	}
	err = guard.Set(ctx(t), key, old.Grant().Token, "redis, late", 0)
	var stale *fence.StaleTokenError
	if !errors.As(err, &stale) || stale.Required != h.Grant().Token {
		t.Fatalf("the old holder's late write=%v; want stale, requiring %d", err, h.Grant().Token)
	}
	if v, _ := rdb.Get(ctx(t), key).Result(); v != "server" {
		t.Fatalf("value=%q, want the server holder's", v)
	}
	h.Release(ctx(t))
	old.Release(ctx(t))
}
