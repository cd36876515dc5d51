package redisgrant_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/redisgrant"
)

// wantNothingWritten fails if the database has keys.
func wantNothingWritten(t *testing.T, rdb *redis.Client) {
	t.Helper()
	if ks := keysOf(t, rdb); len(ks) != 0 {
		t.Fatalf("keys written: %v; bad input must change nothing", ks)
	}
}

func TestGrantor_BadInputWritesNothing(t *testing.T) {
	r := startRedis(t, "--save", "", "--appendonly", "no")
	rdb := clientOf(t, r.Addr)
	g := redisgrant.New(rdb)
	cases := []struct {
		name string
		ttl  time.Duration
	}{
		{"ttl-zero", 0},
		{"ttl-below-min", fence.MinTTL - time.Millisecond},
		{"ttl-negative", -time.Second},
		{"ttl-above-max", fence.MaxTTL + time.Millisecond},
		{"", time.Minute},
		{"bad\x00name", time.Minute},
	}
	for _, c := range cases {
		_, err := g.Acquire(ctx(t), c.name, fence.Wait(), fence.WithTTL(c.ttl))
		wantIs(t, "Acquire("+strconv.Quote(c.name)+", Wait, "+c.ttl.String()+")", err, fence.ErrInvalidArgument)
		_, err = g.Acquire(ctx(t), c.name, fence.WithTTL(c.ttl))
		wantIs(t, "Acquire("+strconv.Quote(c.name)+", "+c.ttl.String()+")", err, fence.ErrInvalidArgument)
	}
	_, _, err := g.Verify(ctx(t), "x", 0)
	wantIs(t, "Verify with token 0", err, fence.ErrInvalidToken)
	wantIs(t, "WithPrefix with a brace", redisgrant.New(rdb, redisgrant.WithPrefix("a{b")).Check(ctx(t)), fence.ErrInvalidArgument)
	wantIs(t, "WithRecheck(0)", redisgrant.New(rdb, redisgrant.WithRecheck(0)).Check(ctx(t)), fence.ErrInvalidArgument)
	wantNothingWritten(t, rdb)
}

// A layout of keys in different hash slots is refused before anything is
// sent, on a standalone Redis too, so it cannot fail half-way on a
// cluster.
func TestGrantor_CrossSlotKeysRefused(t *testing.T) {
	r := startRedis(t, "--save", "", "--appendonly", "no")
	rdb := clientOf(t, r.Addr)
	g := redisgrant.New(rdb, redisgrant.WithKeys(func(name, part string) string { return "locks:" + part + ":" + name }))
	_, err := g.Acquire(ctx(t), "orders")
	wantIs(t, "Acquire with keys in two slots", err, redisgrant.ErrCrossSlot)
	wantNothingWritten(t, rdb)

	// One hash tag is enough.
	g = redisgrant.New(rdb, redisgrant.WithKeys(func(name, part string) string { return "locks:" + part + ":{" + name + "}" }))
	l, err := g.Acquire(ctx(t), "orders")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.Exists(ctx(t), "locks:lease:{orders}", "locks:counter:{orders}").Result(); n != 2 {
		t.Fatalf("%d of the layout's 2 keys exist", n)
	}
	l.Release(ctx(t))
}

func TestGrantor_NoLuaRefused(t *testing.T) {
	t.Run("scripting commands renamed away", func(t *testing.T) {
		r := startRedis(t, "--save", "", "--appendonly", "no", "--rename-command", "EVAL", "", "--rename-command", "EVALSHA", "")
		rdb := clientOf(t, r.Addr)
		_, err := redisgrant.New(rdb).Acquire(ctx(t), "orders")
		wantIs(t, "Acquire without EVAL", err, redisgrant.ErrNoLua)
		wantNothingWritten(t, rdb)
	})
	t.Run("ACL user without scripting", func(t *testing.T) {
		r := startRedis(t, "--save", "", "--appendonly", "no")
		admin := clientOf(t, r.Addr)
		if err := admin.Do(ctx(t), "ACL", "SETUSER", "app", "on", ">pw", "~*", "&*", "+@all", "-@scripting").Err(); err != nil {
			t.Fatal(err)
		}
		app := redis.NewClient(&redis.Options{Addr: r.Addr, Username: "app", Password: "pw"})
		t.Cleanup(func() { app.Close() })
		_, err := redisgrant.New(app).Acquire(ctx(t), "orders")
		wantIs(t, "Acquire as a user without @scripting", err, redisgrant.ErrNoLua)
		wantNothingWritten(t, admin)
	})
}

func TestGrantor_EvictingPolicyRefused(t *testing.T) {
	r := startRedis(t, "--save", "", "--appendonly", "no", "--maxmemory-policy", "allkeys-lru")
	rdb := clientOf(t, r.Addr)
	_, err := redisgrant.New(rdb).Acquire(ctx(t), "orders")
	wantIs(t, "Acquire on allkeys-lru", err, redisgrant.ErrEvictable)
	wantNothingWritten(t, rdb)
}

func TestLease_CorruptOrFullCounter(t *testing.T) {
	rdb := newClient(t)
	g := redisgrant.New(rdb)
	for _, c := range []struct {
		value string
		want  error
	}{
		{"-3", redisgrant.ErrCorrupt},
		{"0", redisgrant.ErrCorrupt},
		{"12abc", redisgrant.ErrCorrupt},
		{"9223372036854775808", redisgrant.ErrCorrupt},
		{"9223372036854775807", fence.ErrTokenOverflow},
	} {
		name := uniqueName(t)
		counter := "fenced:{" + name + "}:counter"
		rdb.HSet(ctx(t), counter, "token", c.value)
		_, err := g.Acquire(ctx(t), name, fence.WithTTL(time.Minute))
		wantIs(t, "Acquire with counter "+c.value, err, c.want)
		if n, _ := rdb.Exists(ctx(t), "fenced:{"+name+"}:lease").Result(); n != 0 {
			t.Fatalf("counter %s: a lease was written", c.value)
		}
		if v, _ := rdb.HGet(ctx(t), counter, "token").Result(); v != c.value {
			t.Fatalf("counter %s became %s", c.value, v)
		}
	}
	name := uniqueName(t)
	rdb.Set(ctx(t), "fenced:{"+name+"}:counter", "7", 0) // a string, not the grantor's hash
	_, err := g.Acquire(ctx(t), name, fence.WithTTL(time.Minute))
	wantIs(t, "Acquire with a counter of another type", err, redisgrant.ErrCorrupt)
}
