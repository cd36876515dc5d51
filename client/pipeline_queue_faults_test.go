//go:build fencedfaults

package client_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/server"
)

// A server whose Pipeline does not know a queue call (the old-pipeline
// test fault answers as a server from before pipelined queue calls, or
// from before the batch calls, does) gets it unary from the SDK: push,
// push batch, batch claim, acks with the claim, ack batch, nack and a
// stale ack all behave as through the Pipeline.
func TestQueue_FallsBackToUnaryForAnOlderPipeline(t *testing.T) {
	for _, old := range []int{1, 2} {
		t.Run(fmt.Sprint("old-pipeline-", old), func(t *testing.T) {
			c, ctx := queueClient(t, func(c *server.Config) { c.Test.OldPipeline = old })
			q := client.NewQueue(c, "jobs")
			s, err := c.NewSession(ctx, client.WithTTL(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := q.Push(ctx, []byte("one")); err != nil {
				t.Fatalf("push: %v", err)
			}
			pushed, err := q.PushBatch(ctx, []client.PushItem{{Payload: []byte("two")}, {Payload: []byte("three")}, {Payload: []byte("x"), DedupeKey: "k"}, {Payload: []byte("y"), DedupeKey: "k"}})
			if err != nil || len(pushed) != 4 || pushed[0].Item != 2 || !pushed[3].Duplicate || pushed[3].Item != pushed[2].Item {
				t.Fatalf("push batch: %+v, %v", pushed, err)
			}
			cls, err := q.ClaimBatch(ctx, s, 10*time.Second, 3)
			if err != nil || len(cls) != 3 || string(cls[0].Payload) != "one" || cls[1].Token <= cls[0].Token || cls[2].Token <= cls[1].Token {
				t.Fatalf("claim batch: %v, %v", cls, err)
			}
			next, ackErrs, err := q.AckAndClaimNextBatch(ctx, s, 10*time.Second, 3, cls[:2])
			if err != nil || len(next) != 1 || string(next[0].Payload) != "x" || errors.Join(ackErrs...) != nil {
				t.Fatalf("ack 2 and claim next: %v, acks %v, %v", next, ackErrs, err)
			}
			errs, err := q.AckBatch(ctx, []*client.Claim{cls[2], next[0]})
			if err != nil || errors.Join(errs...) != nil {
				t.Fatalf("ack batch: %v, %v", errs, err)
			}
			errs, err = q.AckTokens(ctx, []client.ItemToken{{Item: cls[0].Item, Token: cls[0].Token}})
			if err != nil || len(errs) != 1 || !errors.Is(errs[0], fence.ErrStaleToken) {
				t.Fatalf("a second ack: %v, %v; want stale", errs, err)
			}
			if st, err := q.Stats(ctx, 0, 0); err != nil || st.Available+st.Claimed+st.Delayed != 0 {
				t.Fatalf("stats after acking everything: %+v, %v", st, err)
			}
		})
	}
}
