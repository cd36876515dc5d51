package redisgrant_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/redisfence"
	"github.com/fenced-dev/fenced/redisgrant"
)

// exampleClient returns a client of an empty database (database 1 of the
// shared server, flushed), so that examples print the same output however
// often they run.
func exampleClient() *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, DB: 1})
	if err := rdb.FlushDB(context.Background()).Err(); err != nil {
		panic(err)
	}
	return rdb
}

func Example() {
	ctx := context.Background()
	rdb := exampleClient()
	defer rdb.Close()
	g := redisgrant.New(rdb)
	guard := redisfence.New(rdb)

	h, err := g.Acquire(ctx, "report", fence.Wait(), fence.WithTTL(10*time.Second))
	if err != nil {
		panic(err)
	}
	fmt.Println("token", h.Grant().Token)
	// The write carries the token; the guard refuses tokens below the
	// highest it has seen for the key.
	if err := guard.Set(h.Context(), "report:latest", h.Grant().Token, "v1", 0); err != nil {
		panic(err)
	}
	res, _ := h.Release(ctx)
	fmt.Println(res)

	next, _ := g.Acquire(ctx, "report")
	fmt.Println("token", next.Grant().Token)
	res, _ = next.Release(ctx)
	fmt.Println(res)
	// Output:
	// token 1
	// released
	// token 2
	// released
}

func ExampleGrantor_NewTokenBucket() {
	ctx := context.Background()
	rdb := exampleClient()
	defer rdb.Close()
	g := redisgrant.New(rdb)

	// One event every 10 seconds with bursts of 3, shared by every client
	// of this Redis, on Redis's clock.
	l := g.NewTokenBucket("api:customer-17", 0.1, 3)
	for i := 0; i < 4; i++ {
		ok, err := l.Allow(ctx)
		if err != nil {
			panic(err)
		}
		fmt.Println(ok)
	}
	// Output:
	// true
	// true
	// true
	// false
}

func ExampleGrantor_NewSemaphore() {
	ctx := context.Background()
	rdb := exampleClient()
	defer rdb.Close()
	g := redisgrant.New(rdb)

	pool := g.NewSemaphore("pool", 3, 30*time.Second)
	p, err := pool.TryAcquire(ctx, 2)
	if err != nil {
		panic(err)
	}
	for _, x := range p.List() {
		// Fence the slot's resource as x.Scope() with x.Token.
		fmt.Println(x.Scope(), x.Token)
	}
	res, _ := p.Release(ctx)
	fmt.Println(res)
	// Output:
	// pool/0 1
	// pool/1 2
	// released
}
