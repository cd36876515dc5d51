package redisgrant_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/internal/testdb"
	"github.com/fenced-dev/fenced/redisgrant"
)

func TestGrantor_MaxToken(t *testing.T) {
	check := func(t *testing.T, rdb redis.UniversalClient) {
		g := redisgrant.New(rdb)
		if high, err := g.MaxToken(ctx(t)); err != nil || high != 0 {
			t.Fatalf("MaxToken of an empty Redis=%d, %v; want 0", high, err)
		}
		var want fence.Token
		for i, name := range []string{"a", "b", "{odd}name", "c"} {
			rdb.HSet(ctx(t), "fenced:{"+name+"}:counter", "token", 1000*(i+1)+7)
			h, err := g.Acquire(ctx(t), name)
			if err != nil {
				t.Fatal(err)
			}
			want = max(want, h.Grant().Token)
			h.Release(ctx(t))
		}
		p, err := g.NewSemaphore("pool", 3, time.Minute).TryAcquire(ctx(t), 3)
		if err != nil {
			t.Fatal(err)
		}
		p.Release(ctx(t))
		rdb.Set(ctx(t), "other:{x}:counter", "999999", 0) // not the grantor's
		if high, err := g.MaxToken(ctx(t)); err != nil || high != want {
			t.Fatalf("MaxToken=%d, %v; want %d", high, err, want)
		}
	}
	t.Run("standalone", func(t *testing.T) {
		r := startRedis(t, "--save", "", "--appendonly", "no")
		check(t, clientOf(t, r.Addr))
	})
	t.Run("cluster", func(t *testing.T) {
		r, err := testdb.StartRedisCluster()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Stop)
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{r.Addr}})
		t.Cleanup(func() { rdb.Close() })
		check(t, rdb)
	})
	_, err := redisgrant.New(newClient(t), redisgrant.WithKeys(func(n, p string) string { return "{" + n + "}" + p })).MaxToken(ctx(t))
	wantIs(t, "MaxToken with WithKeys", err, fence.ErrInvalidArgument)
}
