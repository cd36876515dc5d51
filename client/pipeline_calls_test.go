package client_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/testserver"
)

// countingTransport counts the unary calls of one service (the requests
// whose path starts with service) a Client sends; pipelined ones ride the Pipeline stream
// (LockService.Pipeline, or the native connection) instead.
type countingTransport struct {
	base    http.RoundTripper
	service string
	unary   atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasPrefix(r.URL.Path, c.service) {
		c.unary.Add(1)
	}
	return c.base.RoundTrip(r)
}

// countingQueueClient is queueClient with protocol p, counting the unary
// queue calls it sends. It has already made a lock call through its
// Pipeline, so the stream's first response, which names what the server's
// Pipeline takes, has arrived.
func countingQueueClient(t *testing.T, p client.Protocol, opts ...testserver.Option) (*client.Client, context.Context, *atomic.Int64) {
	t.Helper()
	return countingClient(t, p, "/fenced.v1.QueueService/", opts...)
}

// countingClient is countingQueueClient counting the unary calls of
// service instead.
func countingClient(t *testing.T, p client.Protocol, service string, opts ...testserver.Option) (*client.Client, context.Context, *atomic.Int64) {
	t.Helper()
	srv := testserver.Start(t, opts...)
	tr := &http.Transport{DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetUnencryptedHTTP2(true)
	ct := &countingTransport{base: tr, service: service}
	c, err := client.New([]string{srv.Addr()}, client.WithProtocol(p), client.WithHTTPClient(&http.Client{Transport: ct}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); tr.CloseIdleConnections() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	l, err := c.Acquire(ctx, "warm", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	return c, ctx, &ct.unary
}

// A current server's Pipeline names the queue calls in its first
// response, and the SDK sends them there, over both protocols: push,
// push batch, claim, batch claim, ack batch and ack send no unary queue
// call. The control: Stats, always unary, is counted.
func TestQueue_UsesTheCurrentServersPipeline(t *testing.T) {
	for _, p := range []client.Protocol{client.ProtocolNative, client.ProtocolConnect} {
		t.Run(p.String(), func(t *testing.T) {
			c, ctx, unary := countingQueueClient(t, p)
			q := client.NewQueue(c, "jobs")
			s, err := c.NewSession(ctx, client.WithTTL(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := q.Push(ctx, []byte("one")); err != nil {
				t.Fatal(err)
			}
			if _, err := q.PushBatch(ctx, []client.PushItem{{Payload: []byte("two")}, {Payload: []byte("three")}}); err != nil {
				t.Fatal(err)
			}
			cl, err := q.Claim(ctx, s, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			cls, err := q.ClaimBatch(ctx, s, 10*time.Second, 2)
			if err != nil || len(cls) != 2 {
				t.Fatalf("claim batch: %v, %v", cls, err)
			}
			if _, err := q.AckBatch(ctx, cls); err != nil {
				t.Fatal(err)
			}
			if err := cl.Ack(ctx); err != nil {
				t.Fatal(err)
			}
			if n := unary.Load(); n != 0 {
				t.Fatalf("%d queue calls went unary to a server whose Pipeline takes them", n)
			}
			if _, err := q.Stats(ctx, 0, 0); err != nil {
				t.Fatal(err)
			}
			if n := unary.Load(); n != 1 {
				t.Fatalf("after Stats: %d unary queue calls counted, want 1 (the counter does not count)", n)
			}
		})
	}
}

// A client whose first calls are queue calls learns what the Pipeline
// takes all the same (its stream opens with an empty message, so the
// server's first response comes): the calls made before that response go
// unary, and once it has come, none does.
func TestQueue_LearnsThePipelineFromQueueCallsAlone(t *testing.T) {
	for _, p := range []client.Protocol{client.ProtocolNative, client.ProtocolConnect} {
		t.Run(p.String(), func(t *testing.T) {
			srv := testserver.Start(t)
			tr := &http.Transport{DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}
			tr.Protocols = new(http.Protocols)
			tr.Protocols.SetUnencryptedHTTP2(true)
			ct := &countingTransport{base: tr, service: "/fenced.v1.QueueService/"}
			c, err := client.New([]string{srv.Addr()}, client.WithProtocol(p), client.WithHTTPClient(&http.Client{Transport: ct}))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			defer tr.CloseIdleConnections()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			q := client.NewQueue(c, "jobs")
			deadline := time.Now().Add(20 * time.Second)
			for {
				before := ct.unary.Load()
				if _, _, err := q.Push(ctx, []byte("x")); err != nil {
					t.Fatal(err)
				}
				if ct.unary.Load() == before {
					break // this push rode the Pipeline
				}
				if time.Now().After(deadline) {
					t.Fatalf("after 20s of pushes, each still goes unary (%d): the Pipeline's first response never came", ct.unary.Load())
				}
				time.Sleep(10 * time.Millisecond)
			}
			before := ct.unary.Load()
			for range 5 {
				if _, _, err := q.Push(ctx, []byte("y")); err != nil {
					t.Fatal(err)
				}
			}
			if n := ct.unary.Load() - before; n != 0 {
				t.Fatalf("%d of 5 pushes went unary after the Pipeline said it takes them", n)
			}
		})
	}
}
