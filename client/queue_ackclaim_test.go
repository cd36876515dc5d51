package client_test

import (
	"errors"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
)

// TestQueue_AckAndClaimNext: AckAndClaimNext acks the claim and claims the
// next item in one call, waiting for one that is pushed later; an ack with
// an ended claim is reported as stale while the claim still goes on.
func TestQueue_AckAndClaimNext(t *testing.T) {
	c, ctx := queueClient(t)
	q := client.NewQueue(c, "jobs")
	s, err := c.NewSession(ctx, client.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"j1", "j2"} {
		if _, _, err := q.Push(ctx, []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	first, err := q.Claim(ctx, s, 10*time.Second)
	if err != nil || string(first.Payload) != "j1" {
		t.Fatalf("claim: %v %v", first, err)
	}
	second, ackErr, err := first.AckAndClaimNext(ctx)
	if err != nil || ackErr != nil || string(second.Payload) != "j2" || second.Token <= first.Token {
		t.Fatalf("AckAndClaimNext: %v, ack %v, err %v; want j1 acked and j2 claimed", second, ackErr, err)
	}
	if first.Context().Err() == nil {
		t.Error("the acked claim's context is not done")
	}
	// The next item does not exist yet: the claim waits for its push,
	// which comes once the claim is seen waiting (not after a sleep: on a
	// loaded machine the push could come first and prove nothing).
	pushed := make(chan error, 1)
	go func() {
		for {
			st, err := q.Stats(ctx, 0, 0)
			if err != nil {
				pushed <- err
				return
			}
			if st.Waiters == 1 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		_, _, err := q.Push(ctx, []byte("j3"))
		pushed <- err
	}()
	third, ackErr, err := second.AckAndClaimNext(ctx)
	if err != nil || ackErr != nil || string(third.Payload) != "j3" {
		t.Fatalf("AckAndClaimNext waiting: %v, ack %v, err %v; want j2 acked and j3 claimed", third, ackErr, err)
	}
	if err := <-pushed; err != nil {
		t.Fatal(err)
	}
	// first's claim ended with its ack: acking it again is stale, and the
	// claim part still claims the next item.
	if _, _, err := q.Push(ctx, []byte("j4")); err != nil {
		t.Fatal(err)
	}
	fourth, ackErr, err := first.AckAndClaimNext(ctx)
	if err != nil || !errors.Is(ackErr, fence.ErrStaleToken) || string(fourth.Payload) != "j4" {
		t.Fatalf("AckAndClaimNext with an ended claim: %v, ack %v, err %v; want stale and j4 claimed", fourth, ackErr, err)
	}
	st, err := q.Stats(ctx, 0, 0)
	if err != nil || st.Claimed != 2 || st.Available != 0 {
		t.Fatalf("stats: %+v %v, want j3 and j4 claimed", st, err)
	}
}
