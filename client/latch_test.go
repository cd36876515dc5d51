package client_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/testserver"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

func latchClient(t *testing.T) (*testserver.Server, *client.Client, context.Context) {
	t.Helper()
	srv := testserver.Start(t)
	c, err := client.New([]string{srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return srv, c, ctx
}

type waitResult struct {
	done bool
	err  error
}

func waitLatch(ctx context.Context, c *client.Client, name string, gen uint64) chan waitResult {
	ch := make(chan waitResult, 1)
	go func() {
		done, err := c.LatchWait(ctx, name, gen)
		ch <- waitResult{done, err}
	}()
	return ch
}

// TestLatch_WaitReleasedAtZero: waiters of a generation are answered only
// once its count reaches zero, with true; a waiter that returned early
// would be caught while the count is still 1. A count-down after zero is
// a no-op.
func TestLatch_WaitReleasedAtZero(t *testing.T) {
	_, c, ctx := latchClient(t)
	l, err := c.LatchCreate(ctx, "job", 2)
	if err != nil || l.Generation != 1 || l.Count != 2 {
		t.Fatalf("create: %+v, %v", l, err)
	}
	w1, w2 := waitLatch(ctx, c, "job", 1), waitLatch(ctx, c, "job", 1)
	if res, _, err := c.LatchCountDown(ctx, "job", 1); err != nil || res != client.Counted {
		t.Fatalf("first count-down: %s, %v", res, err)
	}
	select {
	case r := <-w1:
		t.Fatalf("a waiter returned %+v while the count is 1", r)
	case <-time.After(300 * time.Millisecond):
	}
	if res, l, err := c.LatchCountDown(ctx, "job", 1); err != nil || res != client.Completed || l.Count != 0 {
		t.Fatalf("second count-down: %s %+v, %v", res, l, err)
	}
	for _, w := range []chan waitResult{w1, w2} {
		if r := <-w; !r.done || r.err != nil {
			t.Fatalf("waiter: %+v, want completed", r)
		}
	}
	if done, err := c.LatchWait(ctx, "job", 1); !done || err != nil {
		t.Fatalf("wait on a completed generation: %v, %v", done, err)
	}
	if res, l, err := c.LatchCountDown(ctx, "job", 1); err != nil || res != client.AlreadyComplete || l.Count != 0 {
		t.Fatalf("count-down after zero: %s %+v, %v", res, l, err)
	}
}

// TestLatch_ResetEndsOldWaiters: a reset answers the old generation's
// waiters false, rejects its count-downs (ErrStaleGeneration, nothing
// counted) and leaves the new generation's count alone.
func TestLatch_ResetEndsOldWaiters(t *testing.T) {
	_, c, ctx := latchClient(t)
	if _, err := c.LatchCreate(ctx, "job", 3); err != nil {
		t.Fatal(err)
	}
	w := waitLatch(ctx, c, "job", 1)
	l, err := c.LatchCreate(ctx, "job", 1)
	if err != nil || l.Generation != 2 {
		t.Fatalf("reset: %+v, %v", l, err)
	}
	if r := <-w; r.done || r.err != nil {
		t.Fatalf("old generation's waiter: %+v, want false without error", r)
	}
	res, l, err := c.LatchCountDown(ctx, "job", 1)
	if !errors.Is(err, client.ErrStaleGeneration) || res != client.StaleGeneration || l.Generation != 2 || l.Count != 1 {
		t.Fatalf("count-down of the old generation: %s %+v, %v", res, l, err)
	}
	if j, err := c.LatchJoin(ctx, "job"); err != nil || j.Generation != 2 || j.Count != 1 {
		t.Fatalf("join: %+v, %v", j, err)
	}
}

// TestLatch_RetriedCountDownCountsOnce sends the same count-down (same
// request id) twice, as the SDK does when an answer is lost: it counts
// once; the second is answered DUPLICATE. The same for a create.
func TestLatch_RetriedCountDownCountsOnce(t *testing.T) {
	srv, c, ctx := latchClient(t)
	if _, err := c.LatchCreate(ctx, "job", 2); err != nil {
		t.Fatal(err)
	}
	api := fencedv1connect.NewLatchServiceClient(http.DefaultClient, "http://"+srv.Addr())
	req := &fencedv1.LatchCountDownRequest{Name: "job", Generation: 1, RequestId: "retry-1"}
	for i, want := range []fencedv1.LatchCountDownResult{fencedv1.LatchCountDownResult_LATCH_COUNT_DOWN_RESULT_COUNTED, fencedv1.LatchCountDownResult_LATCH_COUNT_DOWN_RESULT_DUPLICATE} {
		r, err := api.CountDown(ctx, connect.NewRequest(req))
		if err != nil || r.Msg.Result != want || r.Msg.Latch.Count != 1 {
			t.Fatalf("attempt %d: %v, %v; want %v with count 1", i, r, err, want)
		}
	}
	// A retried create (same request id) answers the generation it started
	// and resets nothing; a create with another id starts the next one.
	create := &fencedv1.LatchCreateRequest{Name: "job", Count: 5, RequestId: "create-1"}
	for i := range 2 {
		r, err := api.Create(ctx, connect.NewRequest(create))
		if err != nil || r.Msg.Latch.Generation != 2 || r.Msg.Latch.Count != 5 {
			t.Fatalf("create attempt %d: %v, %v; want generation 2 with count 5", i, r, err)
		}
	}
	if r, err := api.Create(ctx, connect.NewRequest(&fencedv1.LatchCreateRequest{Name: "job", Count: 1, RequestId: "create-2"})); err != nil || r.Msg.Latch.Generation != 3 {
		t.Fatalf("another create: %v, %v; want generation 3", r, err)
	}
}

// TestLatch_BadInput: a count above --max-latch-count, a generation that
// never existed and a latch that does not exist are refused with
// InvalidArgument and change nothing.
func TestLatch_BadInput(t *testing.T) {
	_, c, ctx := latchClient(t)
	if _, err := c.LatchCreate(ctx, "job", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := c.LatchCreate(ctx, "job", 100001); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Errorf("count above the limit: %v", err)
	}
	if _, _, err := c.LatchCountDown(ctx, "job", 7); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Errorf("unknown generation: %v", err)
	}
	if _, err := c.LatchWait(ctx, "nope", 1); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Errorf("wait on a missing latch: %v", err)
	}
	if _, err := c.LatchJoin(ctx, "nope"); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Errorf("join a missing latch: %v", err)
	}
	if j, err := c.LatchJoin(ctx, "job"); err != nil || j.Generation != 1 || j.Count != 2 {
		t.Fatalf("after the refusals: %+v, %v", j, err)
	}
}
