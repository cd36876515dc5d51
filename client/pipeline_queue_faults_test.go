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

// A server whose Pipeline does not take a queue call gets it unary from
// the SDK, which decides from what the stream's first response names
// (PipelineResponse.calls), not from an error: the old-pipeline test
// fault fakes a server from before the field, which names nothing and
// refuses every pipelined queue call (1), and one that names the basic
// queue calls but not the batch calls and refuses those (2). Push, push
// batch, batch claim, acks with the claim, ack batch, nack and a stale
// ack all behave as through the Pipeline, over both protocols, and the
// calls the server does not take, only those, went unary (a refused
// pipelined call would fail the test).
func TestQueue_FallsBackToUnaryForAnOlderPipeline(t *testing.T) {
	for _, old := range []int{1, 2} {
		for _, p := range []client.Protocol{client.ProtocolNative, client.ProtocolConnect} {
			t.Run(fmt.Sprintf("old-pipeline-%d/%s", old, p), func(t *testing.T) {
				c, ctx, unary := countingQueueClient(t, p, func(c *server.Config) { c.Test.OldPipeline = old })
				// wantUnary checks that the calls since the last check
				// went unary when the server takes no queue call (old 1)
				// or when they are batch calls (batch), and through the
				// Pipeline otherwise.
				var seen int64
				wantUnary := func(what string, calls int64, batch bool) {
					t.Helper()
					n := unary.Load()
					want := int64(0)
					if old == 1 || batch {
						want = calls
					}
					if n-seen != want {
						t.Fatalf("%s: %d unary queue calls, want %d", what, n-seen, want)
					}
					seen = n
				}
				q := client.NewQueue(c, "jobs")
				s, err := c.NewSession(ctx, client.WithTTL(5*time.Second))
				if err != nil {
					t.Fatal(err)
				}
				if _, _, err := q.Push(ctx, []byte("one")); err != nil {
					t.Fatalf("push: %v", err)
				}
				wantUnary("push", 1, false)
				pushed, err := q.PushBatch(ctx, []client.PushItem{{Payload: []byte("two")}, {Payload: []byte("three")}, {Payload: []byte("x"), DedupeKey: "k"}, {Payload: []byte("y"), DedupeKey: "k"}})
				if err != nil || len(pushed) != 4 || pushed[0].Item != 2 || !pushed[3].Duplicate || pushed[3].Item != pushed[2].Item {
					t.Fatalf("push batch: %+v, %v", pushed, err)
				}
				wantUnary("push batch", 1, true)
				cls, err := q.ClaimBatch(ctx, s, 10*time.Second, 3)
				if err != nil || len(cls) != 3 || string(cls[0].Payload) != "one" || cls[1].Token <= cls[0].Token || cls[2].Token <= cls[1].Token {
					t.Fatalf("claim batch: %v, %v", cls, err)
				}
				wantUnary("claim batch", 1, false)
				next, ackErrs, err := q.AckAndClaimNextBatch(ctx, s, 10*time.Second, 3, cls[:2])
				if err != nil || len(next) != 1 || string(next[0].Payload) != "x" || errors.Join(ackErrs...) != nil {
					t.Fatalf("ack 2 and claim next: %v, acks %v, %v", next, ackErrs, err)
				}
				wantUnary("acks with a claim", 1, false)
				errs, err := q.AckBatch(ctx, []*client.Claim{cls[2], next[0]})
				if err != nil || errors.Join(errs...) != nil {
					t.Fatalf("ack batch: %v, %v", errs, err)
				}
				wantUnary("ack batch", 1, true)
				errs, err = q.AckTokens(ctx, []client.ItemToken{{Item: cls[0].Item, Token: cls[0].Token}})
				if err != nil || len(errs) != 1 || !errors.Is(errs[0], fence.ErrStaleToken) {
					t.Fatalf("a second ack: %v, %v; want stale", errs, err)
				}
				wantUnary("stale ack", 1, true)
				if st, err := q.Stats(ctx, 0, 0); err != nil || st.Available+st.Claimed+st.Delayed != 0 {
					t.Fatalf("stats after acking everything: %+v, %v", st, err)
				}
			})
		}
	}
}
