package server_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/internal/testserver"
	"github.com/fenced-dev/fenced/internal/wire"
	"github.com/fenced-dev/fenced/internal/wire/wireconnect"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
	"github.com/fenced-dev/fenced/server"
)

const (
	producerToken = "producer-token-0123456789abcdef0123456789abcdef"
	workerToken   = "worker-token-0123456789abcdef0123456789abcdef"
)

// Pushing needs enqueue on the queue's name; claiming, acking, nacking and
// extending need acquire (a claim is a grant); stats needs read. A denied
// call changes nothing.
func TestQueue_Authorization(t *testing.T) {
	dir := t.TempDir()
	authFile := filepath.Join(dir, "auth.jsonl")
	data := authLine(t, "producer", producerToken, server.AuthRole{Prefix: "orders", Permissions: []string{"enqueue"}}) +
		authLine(t, "worker", workerToken, server.AuthRole{Prefix: "orders", Permissions: []string{"acquire", "read"}}) +
		authLine(t, "app", appToken, server.AuthRole{Prefix: "", Permissions: []string{"acquire", "read", "kv-write"}})
	if err := os.WriteFile(authFile, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := testserver.Start(t, func(c *server.Config) { c.AuthFile = authFile })
	ctx := context.Background()
	queues := func(token string) fencedv1connect.QueueServiceClient {
		a := asIdentity(srv.Addr(), token)
		return fencedv1connect.NewQueueServiceClient(a.hc, a.base)
	}
	producer, worker, app := queues(producerToken), queues(workerToken), queues(appToken)

	if _, err := producer.Push(ctx, connect.NewRequest(&fencedv1.QueuePushRequest{Queue: "orders", Payload: []byte("o1")})); err != nil {
		t.Fatalf("producer pushes: %v", err)
	}
	_, err := worker.Push(ctx, connect.NewRequest(&fencedv1.QueuePushRequest{Queue: "orders", Payload: []byte("forged")}))
	denied(t, "worker pushes", err, `"enqueue"`)
	_, err = app.Push(ctx, connect.NewRequest(&fencedv1.QueuePushRequest{Queue: "orders", Payload: []byte("forged")}))
	denied(t, "kv-write does not allow a push", err, `"enqueue"`)
	_, err = producer.Push(ctx, connect.NewRequest(&fencedv1.QueuePushRequest{Queue: "billing", Payload: []byte("x")}))
	denied(t, "producer pushes to another queue", err, `"billing"`)
	_, err = producer.Stats(ctx, connect.NewRequest(&fencedv1.QueueStatsRequest{Queue: "orders"}))
	denied(t, "producer reads stats", err, `"read"`)

	w := asIdentity(srv.Addr(), workerToken)
	sess, secret := w.session(t)
	c, err := worker.Claim(ctx, connect.NewRequest(&fencedv1.QueueClaimRequest{Queue: "orders", Session: sess, Secret: secret, Seq: 1, VisibilityMs: 30000}))
	if err != nil || !c.Msg.Claimed || string(c.Msg.Claim.Payload) != "o1" {
		t.Fatalf("worker claims: %v %v", c, err)
	}
	tok := c.Msg.Claim.Grant.Token
	_, err = producer.Ack(ctx, connect.NewRequest(&fencedv1.QueueAckRequest{Queue: "orders", Item: 1, Token: tok}))
	denied(t, "producer acks", err, `"acquire"`)
	st, err := worker.Stats(ctx, connect.NewRequest(&fencedv1.QueueStatsRequest{Queue: "orders"}))
	if err != nil || st.Msg.Claimed != 1 || st.Msg.Available != 1-1 {
		t.Fatalf("stats after a denied ack: %v %v", st, err)
	}
	// A retried claim (same seq) returns the same claim, issuing nothing.
	again, err := worker.Claim(ctx, connect.NewRequest(&fencedv1.QueueClaimRequest{Queue: "orders", Session: sess, Secret: secret, Seq: 1, VisibilityMs: 30000}))
	if err != nil || again.Msg.Claim.GetGrant().GetToken() != tok {
		t.Fatalf("retried claim: %v %v, want token %d", again, err, tok)
	}
	// The wrong secret is refused before anything is proposed.
	_, err = worker.Claim(ctx, connect.NewRequest(&fencedv1.QueueClaimRequest{Queue: "orders", Session: sess, Secret: "0123456789abcdef0123456789abcdef", Seq: 2, VisibilityMs: 30000}))
	if !errors.Is(wireconnect.Decode(err, wire.Call{}), fence.ErrNotOwner) {
		t.Fatalf("claim with the wrong secret: %v, want not-owner", err)
	}
	if _, err := worker.Ack(ctx, connect.NewRequest(&fencedv1.QueueAckRequest{Queue: "orders", Item: 1, Token: tok})); err != nil {
		t.Fatalf("worker acks: %v", err)
	}
	_, err = worker.Ack(ctx, connect.NewRequest(&fencedv1.QueueAckRequest{Queue: "orders", Item: 1, Token: tok}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || !errors.Is(wireconnect.Decode(err, wire.Call{}), fence.ErrStaleToken) {
		t.Fatalf("second ack: %v (code %v), want a stale-token rejection", err, connect.CodeOf(err))
	}
}

// Bad input to the API is refused with InvalidArgument (or
// ResourceExhausted for a payload above --queue-max-payload) and changes
// nothing.
func TestQueue_BadInput(t *testing.T) {
	srv := testserver.Start(t, func(c *server.Config) { c.Queue.MaxPayloadBytes, c.Queue.MaxItems = 100, 1 })
	a := asIdentity(srv.Addr(), "")
	q := fencedv1connect.NewQueueServiceClient(a.hc, a.base)
	ctx := context.Background()
	if _, err := q.Push(ctx, connect.NewRequest(&fencedv1.QueuePushRequest{Queue: "q", Payload: []byte("ok")})); err != nil {
		t.Fatal(err)
	}
	sess, secret := a.session(t)
	stats := func() string {
		st, err := q.Stats(ctx, connect.NewRequest(&fencedv1.QueueStatsRequest{Queue: "q", Items: 10}))
		if err != nil {
			t.Fatal(err)
		}
		return st.Msg.String()
	}
	before := stats()
	for _, c := range []struct {
		name string
		call func() error
		code connect.Code
	}{
		{"payload above the limit", func() error {
			_, err := q.Push(ctx, connect.NewRequest(&fencedv1.QueuePushRequest{Queue: "q", Payload: make([]byte, 101)}))
			return err
		}, connect.CodeResourceExhausted},
		{"queues at --queue-max-items", func() error {
			_, err := q.Push(ctx, connect.NewRequest(&fencedv1.QueuePushRequest{Queue: "q", Payload: []byte("second")}))
			if err != nil && !strings.Contains(err.Error(), "--queue-max-items") {
				t.Errorf("the refusal does not name its flag: %v", err)
			}
			return err
		}, connect.CodeResourceExhausted},
		{"malformed queue name", func() error {
			_, err := q.Push(ctx, connect.NewRequest(&fencedv1.QueuePushRequest{Queue: "q\u200bx"}))
			return err
		}, connect.CodeInvalidArgument},
		{"visibility 0", func() error {
			_, err := q.Claim(ctx, connect.NewRequest(&fencedv1.QueueClaimRequest{Queue: "q", Session: sess, Secret: secret, Seq: 1}))
			return err
		}, connect.CodeInvalidArgument},
		{"visibility above 12h", func() error {
			_, err := q.Claim(ctx, connect.NewRequest(&fencedv1.QueueClaimRequest{Queue: "q", Session: sess, Secret: secret, Seq: 1, VisibilityMs: 12*3600*1000 + 1}))
			return err
		}, connect.CodeInvalidArgument},
		{"claim without a session", func() error {
			_, err := q.Claim(ctx, connect.NewRequest(&fencedv1.QueueClaimRequest{Queue: "q", VisibilityMs: 1000}))
			return err
		}, connect.CodeInvalidArgument},
		{"unknown item", func() error {
			_, err := q.Ack(ctx, connect.NewRequest(&fencedv1.QueueAckRequest{Queue: "q", Item: 5, Token: 1}))
			return err
		}, connect.CodeInvalidArgument},
		{"unknown queue", func() error {
			_, err := q.Nack(ctx, connect.NewRequest(&fencedv1.QueueNackRequest{Queue: "nope", Item: 1, Token: 1}))
			return err
		}, connect.CodeInvalidArgument},
		{"extend to 0", func() error {
			_, err := q.Extend(ctx, connect.NewRequest(&fencedv1.QueueExtendRequest{Queue: "q", Item: 1, Token: 1}))
			return err
		}, connect.CodeInvalidArgument},
		{"too many stats items", func() error {
			_, err := q.Stats(ctx, connect.NewRequest(&fencedv1.QueueStatsRequest{Queue: "q", Items: 1001}))
			return err
		}, connect.CodeInvalidArgument},
	} {
		err := c.call()
		if connect.CodeOf(err) != c.code {
			t.Errorf("%s: %v (code %v), want %v", c.name, err, connect.CodeOf(err), c.code)
		}
	}
	if after := stats(); after != before {
		t.Fatalf("bad input changed the queue:\nbefore %s\nafter  %s", before, after)
	}
	resp, err := http.Get("http://" + srv.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{`fenced_queue_requests_total{op="push",outcome="ok"} 1`, `fenced_queue_requests_total{op="claim",outcome="error"} 3`, "fenced_queue_items 1", `fenced_limit_rejections_total{limit="queue_items"} 1`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
