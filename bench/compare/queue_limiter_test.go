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

// TestQueueBatchRecipes checks the batched queue of both adapters on real
// servers: a push of 5 in one call, a claim of up to 4 gets 4 with
// increasing tokens, its acks (one with a stale token) ride the next
// claim, which gets the fifth: the stale ack is refused and changes
// nothing, the others are acked.
func TestQueueBatchRecipes(t *testing.T) {
	for _, name := range []string{"redis", "fenced"} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			w := lockers(t, ctx, launchFor(t, name), 1)[0].(bench.BatchQueuer)
			const q = "test/queue-batch"
			if err := w.PushBatch(ctx, q, [][]byte{[]byte("a"), []byte("b"), []byte("c"), []byte("d"), []byte("e")}); err != nil {
				t.Fatal(err)
			}
			got, _, err := w.ClaimBatch(ctx, q, 4, 10*time.Second, nil)
			if err != nil || len(got) != 4 {
				t.Fatalf("claim of up to 4 of 5: %v, %v", got, err)
			}
			for i := 1; i < len(got); i++ {
				if got[i].Token <= got[i-1].Token {
					t.Fatalf("the batch's tokens do not increase: %v", got)
				}
			}
			acks := append([]bench.ItemToken(nil), got...)
			stale := got[0]
			if name == "redis" { // fenced's adapter acks through the Claims it holds
				acks[0].Token--
			}
			next, ackErrs, err := w.ClaimBatch(ctx, q, 4, 10*time.Second, acks)
			if err != nil || len(next) != 1 || len(ackErrs) != 4 {
				t.Fatalf("acks of 4 with the claim of the fifth: %v, %v, %v", next, ackErrs, err)
			}
			for i, e := range ackErrs {
				if (e != nil) != (name == "redis" && i == 0) {
					t.Fatalf("ack %d: %v", i, e)
				}
			}
			if next[0].Token <= got[3].Token {
				t.Fatalf("the next claim's token %d is not above the batch's %v", next[0].Token, got)
			}
			if name == "redis" {
				if err := w.Ack(ctx, q, stale.Item, stale.Token); err != nil {
					t.Fatalf("the first item's own ack, after a stale one: %v", err)
				}
			}
			if err := w.Ack(ctx, q, next[0].Item, next[0].Token); err != nil {
				t.Fatal(err)
			}
		})
	}
}
