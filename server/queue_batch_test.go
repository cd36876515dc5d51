package server_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/fenced-dev/fenced/internal/testserver"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
	"github.com/fenced-dev/fenced/server"
)

// Batches over the unary API, with --queue-max-batch 3: a push batch is
// all or none (an item above the payload limit, or a batch above the
// limit, enqueues nothing; duplicates are answered per item); a batch
// claim takes up to max_items with increasing tokens; its acks and an ack
// batch answer each item (acked, stale, not found); bad batches (too
// many, ack_item with acks, item 0) are refused and change nothing; the
// metrics count the batches.
func TestQueue_Batches(t *testing.T) {
	srv := testserver.Start(t, func(c *server.Config) { c.Queue.MaxPayloadBytes, c.Queue.MaxBatch = 100, 3 })
	a := asIdentity(srv.Addr(), "")
	q := fencedv1connect.NewQueueServiceClient(a.hc, a.base)
	ctx := context.Background()
	sess, secret := a.session(t)
	stats := func() string {
		st, err := q.Stats(ctx, connect.NewRequest(&fencedv1.QueueStatsRequest{Queue: "q", Items: 10}))
		if err != nil {
			t.Fatal(err)
		}
		return st.Msg.String()
	}
	pushed, err := q.PushBatch(ctx, connect.NewRequest(&fencedv1.QueuePushBatchRequest{Queue: "q", Items: []*fencedv1.QueuePushItem{
		{Payload: []byte("a"), DedupeKey: "ka"}, {Payload: []byte("b")}, {Payload: []byte("a again"), DedupeKey: "ka"},
	}}))
	if err != nil {
		t.Fatal(err)
	}
	if it := pushed.Msg.Items; len(it) != 3 || it[0].Item != 1 || it[1].Item != 2 || !it[2].Duplicate || it[2].Item != 1 {
		t.Fatalf("push batch: %v; want items 1, 2 and a duplicate of 1", pushed.Msg)
	}
	before := stats()
	for _, c := range []struct {
		name string
		call func() error
		code connect.Code
	}{
		{"an item above the payload limit", func() error {
			_, err := q.PushBatch(ctx, connect.NewRequest(&fencedv1.QueuePushBatchRequest{Queue: "q", Items: []*fencedv1.QueuePushItem{{Payload: []byte("ok")}, {Payload: make([]byte, 101)}}}))
			return err
		}, connect.CodeResourceExhausted},
		{"payloads above the limit together", func() error {
			_, err := q.PushBatch(ctx, connect.NewRequest(&fencedv1.QueuePushBatchRequest{Queue: "q", Items: []*fencedv1.QueuePushItem{{Payload: make([]byte, 60)}, {Payload: make([]byte, 60)}}}))
			return err
		}, connect.CodeResourceExhausted},
		{"a push batch above --queue-max-batch", func() error {
			_, err := q.PushBatch(ctx, connect.NewRequest(&fencedv1.QueuePushBatchRequest{Queue: "q", Items: make([]*fencedv1.QueuePushItem, 4)}))
			if err != nil && !strings.Contains(err.Error(), "--queue-max-batch") {
				t.Errorf("the refusal does not name its flag: %v", err)
			}
			return err
		}, connect.CodeInvalidArgument},
		{"an empty push batch", func() error {
			_, err := q.PushBatch(ctx, connect.NewRequest(&fencedv1.QueuePushBatchRequest{Queue: "q"}))
			return err
		}, connect.CodeInvalidArgument},
		{"a claim above --queue-max-batch", func() error {
			_, err := q.Claim(ctx, connect.NewRequest(&fencedv1.QueueClaimRequest{Queue: "q", Session: sess, Secret: secret, Seq: 1, VisibilityMs: 30000, MaxItems: 4}))
			return err
		}, connect.CodeInvalidArgument},
		{"ack_item and acks", func() error {
			_, err := q.Claim(ctx, connect.NewRequest(&fencedv1.QueueClaimRequest{Queue: "q", Session: sess, Secret: secret, Seq: 1, VisibilityMs: 30000, AckItem: 1, AckToken: 1, Acks: []*fencedv1.QueueAckItem{{Item: 2, Token: 1}}}))
			return err
		}, connect.CodeInvalidArgument},
		{"an ack of item 0 in a claim", func() error {
			_, err := q.Claim(ctx, connect.NewRequest(&fencedv1.QueueClaimRequest{Queue: "q", Session: sess, Secret: secret, Seq: 1, VisibilityMs: 30000, Acks: []*fencedv1.QueueAckItem{{Item: 0, Token: 1}}}))
			return err
		}, connect.CodeInvalidArgument},
		{"an ack batch with token 0", func() error {
			_, err := q.AckBatch(ctx, connect.NewRequest(&fencedv1.QueueAckBatchRequest{Queue: "q", Items: []*fencedv1.QueueAckItem{{Item: 1, Token: 0}}}))
			return err
		}, connect.CodeInvalidArgument},
		{"an empty ack batch", func() error {
			_, err := q.AckBatch(ctx, connect.NewRequest(&fencedv1.QueueAckBatchRequest{Queue: "q"}))
			return err
		}, connect.CodeInvalidArgument},
	} {
		if err := c.call(); connect.CodeOf(err) != c.code {
			t.Errorf("%s: %v (code %v), want %v", c.name, err, connect.CodeOf(err), c.code)
		}
	}
	if after := stats(); after != before {
		t.Fatalf("bad batches changed the queue:\nbefore %s\nafter  %s", before, after)
	}
	if _, err := q.PushBatch(ctx, connect.NewRequest(&fencedv1.QueuePushBatchRequest{Queue: "q", Items: []*fencedv1.QueuePushItem{{Payload: []byte("c")}, {Payload: []byte("d")}}})); err != nil {
		t.Fatal(err)
	}
	claim, err := q.Claim(ctx, connect.NewRequest(&fencedv1.QueueClaimRequest{Queue: "q", Session: sess, Secret: secret, Seq: 1, VisibilityMs: 30000, MaxItems: 3}))
	if err != nil {
		t.Fatal(err)
	}
	cs := claim.Msg.Claims
	if len(cs) != 3 || cs[0].Item != 1 || cs[2].Item != 3 || claim.Msg.Claim.Item != 1 || cs[1].Grant.Token <= cs[0].Grant.Token || cs[2].Grant.Token <= cs[1].Grant.Token {
		t.Fatalf("batch claim: %v; want items 1 to 3 with increasing tokens", claim.Msg)
	}
	// The acks of items 1 and 2 ride the claim of item 4 (with a stale
	// token for 3 and an item the queue never had).
	next, err := q.Claim(ctx, connect.NewRequest(&fencedv1.QueueClaimRequest{Queue: "q", Session: sess, Secret: secret, Seq: 2, VisibilityMs: 30000, MaxItems: 3, Acks: []*fencedv1.QueueAckItem{
		{Item: 1, Token: cs[0].Grant.Token}, {Item: 2, Token: cs[1].Grant.Token}, {Item: 3, Token: cs[0].Grant.Token},
	}}))
	if err != nil {
		t.Fatal(err)
	}
	want := []fencedv1.AckOutcome{fencedv1.AckOutcome_ACK_OUTCOME_ACKED, fencedv1.AckOutcome_ACK_OUTCOME_ACKED, fencedv1.AckOutcome_ACK_OUTCOME_STALE}
	if got := next.Msg.AckOutcomes; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || len(next.Msg.Claims) != 1 || next.Msg.Claims[0].Item != 4 {
		t.Fatalf("acks with the claim: %v; want acked, acked, stale and item 4 claimed", next.Msg)
	}
	acked, err := q.AckBatch(ctx, connect.NewRequest(&fencedv1.QueueAckBatchRequest{Queue: "q", Items: []*fencedv1.QueueAckItem{
		{Item: 3, Token: cs[2].Grant.Token}, {Item: 4, Token: next.Msg.Claims[0].Grant.Token}, {Item: 3, Token: cs[2].Grant.Token},
	}}))
	if err != nil {
		t.Fatal(err)
	}
	if got := acked.Msg.Outcomes; len(got) != 3 || got[0] != want[0] || got[1] != want[0] || got[2] != want[2] {
		t.Fatalf("ack batch: %v; want acked, acked, stale (acked before in the batch)", acked.Msg)
	}
	if nf, err := q.AckBatch(ctx, connect.NewRequest(&fencedv1.QueueAckBatchRequest{Queue: "q", Items: []*fencedv1.QueueAckItem{{Item: 9, Token: 1}}})); err != nil || len(nf.Msg.Outcomes) != 1 || nf.Msg.Outcomes[0] != fencedv1.AckOutcome_ACK_OUTCOME_NOT_FOUND {
		t.Fatalf("ack batch of an item never pushed: %v, %v; want not found", nf, err)
	}
	if st := stats(); !strings.Contains(st, "exists:true") || strings.Contains(st, "available") || strings.Contains(st, "claimed") {
		t.Fatalf("stats after acking every item: %s", st)
	}
	resp, err := http.Get("http://" + srv.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, w := range []string{`fenced_queue_requests_total{op="ack",outcome="ok"} 4`, `fenced_queue_requests_total{op="ack",outcome="stale"} 2`, `fenced_queue_requests_total{op="ack",outcome="error"} 3`, `fenced_queue_batch_items_count{op="claim"} 2`, `fenced_queue_batch_items_sum{op="push"} 5`} {
		if !strings.Contains(string(body), w) {
			t.Errorf("/metrics lacks %q", w)
		}
	}
}
