package redisgrant_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/internal/testdb"
	"github.com/fenced-dev/fenced/redisfence"
	"github.com/fenced-dev/fenced/redisgrant"
)

// redisAddr is a throwaway standalone redis-server shared by the tests
// that need no server of their own.
var redisAddr string

func TestMain(m *testing.M) {
	if os.Getenv("REDISGRANT_HOLDER") != "" {
		os.Exit(holder())
	}
	r, err := testdb.StartRedis()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	redisAddr = r.Addr
	code := m.Run()
	r.Stop()
	os.Exit(code)
}

// holder is the test binary run as a lock holder in its own process (for
// SIGSTOP): it acquires REDISGRANT_NAME for REDISGRANT_TTL, prints its
// token, then for every line on stdin writes the line to the key
// REDISGRANT_NAME through redisfence with its token and prints "ok" or
// the error.
func holder() int {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDISGRANT_HOLDER")})
	g := redisgrant.New(rdb)
	name := os.Getenv("REDISGRANT_NAME")
	ttl, _ := time.ParseDuration(os.Getenv("REDISGRANT_TTL"))
	h, err := g.Acquire(ctx, name, fence.Wait(), fence.WithTTL(ttl))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	l := h.(*redisgrant.Lease)
	fmt.Println("token", l.Token())
	guard := redisfence.New(rdb)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if err := guard.Set(ctx, "data:"+name, l.Token(), in.Text(), 0); err != nil {
			fmt.Println("error", err)
			continue
		}
		fmt.Println("ok")
	}
	return 0
}

// newClient returns a client of the shared server, closed when t ends.
func newClient(t testing.TB) *redis.Client {
	return clientOf(t, redisAddr)
}

// clientOf returns a client of addr, closed when t ends.
func clientOf(t testing.TB, addr string) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// startRedis starts a server of the test's own with args, stopped when t
// ends.
func startRedis(t testing.TB, args ...string) *testdb.Redis {
	t.Helper()
	r, err := testdb.StartRedisArgs(args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}

// ctx returns a context that ends with t.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// uniqueName returns a lock name no other test uses.
func uniqueName(t testing.TB) string {
	return fmt.Sprintf("%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano())
}

// keysOf returns every key of the database, sorted by Redis's SCAN order.
func keysOf(t testing.TB, rdb *redis.Client) []string {
	t.Helper()
	ks, err := rdb.Keys(ctx(t), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

// wantIs fails unless errors.Is(err, target).
func wantIs(t testing.TB, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: err=%v, want %v", what, err, target)
	}
}

// mustAcquire acquires name or fails the test.
func mustAcquire(t testing.TB, g *redisgrant.Grantor, name string, ttl time.Duration) *redisgrant.Lease {
	t.Helper()
	h, err := g.Acquire(ctx(t), name, fence.Wait(), fence.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	return h.(*redisgrant.Lease)
}

// contextWithTimeout returns a context that ends after d or with t.
func contextWithTimeout(t testing.TB, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx(t), d)
}
