package main

import (
	"context"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/bench"
)

// TestQueueRecipes checks the Redis reliable-queue recipe (and fenced's
// SDK queue) on real servers: a claim on an empty queue waits until an
// item is pushed, an ack with a token that is not the claim's changes
// nothing, the claim's own ack removes the item, and a second ack fails.
func TestQueueRecipes(t *testing.T) {
	for _, name := range []string{"redis", "fenced"} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			ls := lockers(t, ctx, launchFor(t, name), 2)
			worker, producer := ls[0].(bench.Queuer), ls[1].(bench.Queuer)
			const q = "test/queue"
			type claimed struct {
				item  string
				token uint64
				err   error
			}
			got := make(chan claimed, 1)
			go func() {
				item, token, err := worker.Claim(ctx, q, 10*time.Second)
				got <- claimed{item, token, err}
			}()
			select {
			case c := <-got:
				t.Fatalf("a claim on an empty queue returned %+v", c)
			case <-time.After(300 * time.Millisecond):
			}
			if err := producer.Push(ctx, q, []byte("job")); err != nil {
				t.Fatal(err)
			}
			var c claimed
			select {
			case c = <-got:
			case <-time.After(20 * time.Second):
				t.Fatal("the claim did not return after a push")
			}
			if c.err != nil || c.token == 0 {
				t.Fatalf("claim: %+v", c)
			}
			if name == "redis" { // fenced's adapter acks through the Claim it holds
				if err := worker.Ack(ctx, q, c.item, c.token-1); err == nil {
					t.Fatal("an ack with a stale token was accepted")
				}
			}
			if err := worker.Ack(ctx, q, c.item, c.token); err != nil {
				t.Fatalf("the claim's own ack (after a stale one): %v", err)
			}
			if err := worker.Ack(ctx, q, c.item, c.token); err == nil {
				t.Fatal("a second ack of an acked item was accepted")
			}
		})
	}
}

// TestLimiterRecipes checks the Redis Lua token bucket (and fenced's
// limiter through the same adapter interface) on real servers: a bucket
// of 2 refilling 1 a second grants two takes at once and refuses the
// third.
func TestLimiterRecipes(t *testing.T) {
	for _, name := range []string{"redis", "fenced"} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			sys, err := launchFor(t, name).system(false, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer sys.Close()
			ls, err := sys.(bench.LimiterSystem).NewLimiters(ctx, "test/bucket", 2, 1, 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			var grants []bool
			for range 3 {
				ok, err := ls[0].Allow(ctx)
				if err != nil {
					t.Fatal(err)
				}
				grants = append(grants, ok)
			}
			if !grants[0] || !grants[1] || grants[2] {
				t.Fatalf("takes of a bucket of 2: %v; want true, true, false", grants)
			}
			if name == "redis" {
				if _, err := sys.(bench.LimiterSystem).NewLimiters(ctx, "test/bucket", 2, 1, 1, 8); err == nil {
					t.Fatal("the Redis bucket accepted a batch it does not build")
				}
			}
		})
	}
}
