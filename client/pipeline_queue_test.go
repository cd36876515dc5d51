package client_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/fsm"
	"github.com/fenced-dev/fenced/server"
)

// The SDK's queue calls ride the Pipeline stream: a payload of the
// largest size a server may allow (1 MiB) is pushed and claimed intact,
// beside small calls packed with it, and one just above the server's limit
// is refused with fence.ErrLimitExceeded.
func TestQueue_LargestPayloadThroughThePipeline(t *testing.T) {
	c, ctx := queueClient(t, func(c *server.Config) { c.Queue.MaxPayloadBytes = fsm.MaxQueuePayloadBytes })
	q := client.NewQueue(c, "big")
	big := bytes.Repeat([]byte("0123456789abcdef"), fsm.MaxQueuePayloadBytes/16)
	done := make(chan error, 1)
	go func() { _, _, err := q.Push(ctx, []byte("small")); done <- err }()
	if _, _, err := q.Push(ctx, big); err != nil {
		t.Fatalf("push of %d bytes: %v", len(big), err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s, err := c.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got [][]byte
	for range 2 {
		cl, err := q.Claim(ctx, s, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, cl.Payload)
		if err := cl.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !(bytes.Equal(got[0], big) || bytes.Equal(got[1], big)) {
		t.Fatalf("claimed payloads of %d and %d bytes; want one of them the %d pushed", len(got[0]), len(got[1]), len(big))
	}
	if _, _, err := q.Push(ctx, append(big, 'x')); !errors.Is(err, fence.ErrLimitExceeded) {
		t.Fatalf("push above the limit: %v, want ErrLimitExceeded", err)
	}
}
