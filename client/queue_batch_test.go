package client_test

import (
	"errors"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
)

// Batches through the Pipeline: a ClaimBatch that waits on an empty queue
// is handed up to its max of the items one PushBatch enqueues (pushed by
// the server, not polled), each with its own increasing token; the rest
// stay for the next claim; AckAndClaimNextBatch acks them with the next
// claim, reporting an ended claim as stale while the others are acked.
func TestQueue_BatchesThroughThePipeline(t *testing.T) {
	c, ctx := queueClient(t)
	q := client.NewQueue(c, "jobs")
	s, err := c.NewSession(ctx, client.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan []*client.Claim, 1)
	go func() {
		cls, err := q.ClaimBatch(ctx, s, 10*time.Second, 3)
		if err != nil {
			t.Error(err)
		}
		got <- cls
	}()
	// Wait until the claim waits on the queue.
	for {
		st, err := q.Stats(ctx, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if st.Waiters == 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := q.PushBatch(ctx, []client.PushItem{{Payload: []byte("a")}, {Payload: []byte("b")}, {Payload: []byte("c")}, {Payload: []byte("d")}}); err != nil {
		t.Fatal(err)
	}
	cls := <-got
	if len(cls) != 3 || string(cls[0].Payload) != "a" || string(cls[2].Payload) != "c" || !(cls[0].Token < cls[1].Token && cls[1].Token < cls[2].Token) {
		t.Fatalf("waiting batch claim got %v; want a, b, c with increasing tokens", cls)
	}
	// The second claim's keep-alive is stopped and its item nacked
	// elsewhere: its ack with the next claim is stale; the others are
	// acked; the next claim gets d and then b again (redelivered).
	if err := q.NackToken(ctx, cls[1].Item, cls[1].Token, 0); err != nil {
		t.Fatal(err)
	}
	next, ackErrs, err := q.AckAndClaimNextBatch(ctx, s, 10*time.Second, 3, cls)
	if err != nil || len(ackErrs) != 3 || ackErrs[0] != nil || !errors.Is(ackErrs[1], fence.ErrStaleToken) || ackErrs[2] != nil {
		t.Fatalf("ack and claim next: acks %v, %v", ackErrs, err)
	}
	if len(next) != 2 || string(next[0].Payload) != "b" || string(next[1].Payload) != "d" || next[0].Token <= cls[2].Token {
		t.Fatalf("next claims %v; want b (again, a higher token) and d", next)
	}
	errs, err := q.AckBatch(ctx, next)
	if err != nil || errors.Join(errs...) != nil {
		t.Fatalf("ack batch: %v, %v", errs, err)
	}
	if st, err := q.Stats(ctx, 0, 0); err != nil || st.Available+st.Claimed != 0 {
		t.Fatalf("stats: %+v, %v; want an empty queue", st, err)
	}
}
