package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// TestLimiter_AllowAndWaitInQueue: a bucket of one token refilled every
// 2s grants one Allow, refuses the next with a retry-after within the
// refill, and a Wait queues and is answered when the token is back (not
// before: a Wait answered at once would be caught by the elapsed time).
func TestLimiter_AllowAndWaitInQueue(t *testing.T) {
	_, c, ctx := latchClient(t)
	if _, err := c.LimiterConfig(ctx, "api", client.LimiterSpec{Algorithm: client.TokenBucket, Limit: 1, Rate: 1, Window: 2 * time.Second, Queue: 1}, false); err != nil {
		t.Fatal(err)
	}
	l := c.Limiter("api")
	start := time.Now()
	if ok, err := l.Allow(ctx); !ok || err != nil {
		t.Fatalf("first allow: %v, %v", ok, err)
	}
	r, err := l.ReserveN(ctx, 1)
	if err != nil || r.OK || r.RetryAfter <= 0 || r.RetryAfter > 2*time.Second {
		t.Fatalf("second take: %+v, %v; want refused with a retry-after up to 2s", r, err)
	}
	if err := l.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 1900*time.Millisecond {
		t.Fatalf("wait answered after %v, before the token was back (2s)", el)
	}
}

// TestLimiter_QueueBounded: with a queue of one, a second take that would
// wait is refused with a retry-after instead of queued.
//
// A fixed window is aligned to the leader's clock (window k is
// [k*W, (k+1)*W)), so the queued take is granted at the next boundary,
// anywhere from 0 to W after the first take: the test reads the
// leader's clock (LimiterDescribe's At) around each step instead of
// assuming the steps fit in the window. A step that a boundary may have
// overtaken proves nothing and the run is tried again with a window twice
// as long; one that shows a wrong answer before the boundary fails.
func TestLimiter_QueueBounded(t *testing.T) {
	srv, c, _ := latchClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	api := fencedv1connect.NewLimiterServiceClient(http.DefaultClient, "http://"+srv.Addr())
	for attempt, w := 0, 2*time.Second; attempt < 5; attempt, w = attempt+1, 2*w {
		if queueBoundedOnce(t, ctx, c, api, fmt.Sprintf("api%d", attempt), w) {
			return
		}
		t.Logf("window %v: a window boundary came between the steps; again with a longer window", w)
	}
	t.Fatal("every window, up to 32s, ended before the steps were done: the machine is too slow to tell")
}

// queueBoundedOnce runs TestLimiter_QueueBounded with window w, reporting
// false when a window boundary may have come between its steps.
func queueBoundedOnce(t *testing.T, ctx context.Context, c *client.Client, api fencedv1connect.LimiterServiceClient, name string, w time.Duration) bool {
	t.Helper()
	if _, err := c.LimiterConfig(ctx, name, client.LimiterSpec{Algorithm: client.FixedWindow, Limit: 1, Window: w, Queue: 1}, false); err != nil {
		t.Fatal(err)
	}
	take := func(wait time.Duration) (*fencedv1.LimiterTakeResponse, error) {
		r, err := api.Take(ctx, connect.NewRequest(&fencedv1.LimiterTakeRequest{Name: name, Permits: 1, MaxWaitMs: wait.Milliseconds()}))
		if err != nil {
			return nil, err
		}
		return r.Msg, nil
	}
	clock := func() (client.LimiterInfo, int64) {
		info, err := c.LimiterDescribe(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return info, info.At.UnixMilli() / w.Milliseconds()
	}
	_, before := clock()
	if r, err := take(0); err != nil || !r.Granted {
		t.Fatalf("first take: %v, %v", r, err)
	}
	if _, after := clock(); after != before {
		return false // which window the first take counts in is not known
	}
	boundary := time.UnixMilli((before + 1) * w.Milliseconds())
	queued := make(chan *fencedv1.LimiterTakeResponse, 1)
	go func() { r, _ := take(2*w + 10*time.Second); queued <- r }()
	for {
		info, _ := clock()
		if info.Waiting == 1 {
			break
		}
		select {
		case r := <-queued:
			if info, _ := clock(); info.At.Before(boundary) {
				t.Fatalf("the waiting take returned %v before its window began at %v (leader's clock %v)", r, boundary, info.At)
			}
			return false // it was granted at the boundary before it was seen waiting
		case <-time.After(10 * time.Millisecond):
		}
	}
	full, err := take(2*w + 10*time.Second)
	if err != nil {
		t.Fatalf("take with the queue full: %v", err)
	}
	// The third take was decided at the latest at the leader's time
	// below, less the time it waited if it was queued.
	info, _ := clock()
	decided := info.At.Add(-time.Duration(full.WaitedMs) * time.Millisecond)
	if !decided.Before(boundary) {
		<-queued
		return false // the third take may have come after the boundary
	}
	if full.Granted || full.RetryAfterMs <= 0 {
		t.Fatalf("take with the queue full, decided before %v: %v; want refused with a retry-after", boundary, full)
	}
	if r := <-queued; r == nil || !r.Granted || r.WaitedMs <= 0 {
		t.Fatalf("queued take: %v; want granted after a wait", r)
	}
	return true
}

// TestLimiter_Batching: a handle that batches takes 4 permits per round
// trip and hands them out locally, so the server counts 4 for the first
// three Allows; the fifth Allow takes the next batch.
func TestLimiter_Batching(t *testing.T) {
	_, c, ctx := latchClient(t)
	if _, err := c.LimiterConfig(ctx, "api", client.LimiterSpec{Algorithm: client.FixedWindow, Limit: 10, Window: time.Hour}, false); err != nil {
		t.Fatal(err)
	}
	l := c.Limiter("api", client.WithBatch(4, time.Minute))
	available := func() uint64 {
		info, err := c.LimiterDescribe(ctx, "api")
		if err != nil {
			t.Fatal(err)
		}
		return info.Available
	}
	for i := range 3 {
		if ok, err := l.Allow(ctx); !ok || err != nil {
			t.Fatalf("allow %d: %v, %v", i, ok, err)
		}
	}
	if a := available(); a != 6 {
		t.Fatalf("after 3 batched allows the server has %d available, want 6 (one batch of 4)", a)
	}
	for i := range 2 {
		if ok, err := l.Allow(ctx); !ok || err != nil {
			t.Fatalf("allow %d: %v, %v", 3+i, ok, err)
		}
	}
	if a := available(); a != 2 {
		t.Fatalf("after 5 batched allows the server has %d available, want 2", a)
	}
}

// TestLimiter_ConfigAndBadInput: a changed configuration is refused while
// permits are out and taken with replace; malformed configurations and
// takes are refused with InvalidArgument and change nothing.
func TestLimiter_ConfigAndBadInput(t *testing.T) {
	_, c, ctx := latchClient(t)
	spec := client.LimiterSpec{Algorithm: client.SlidingWindow, Limit: 5, Window: time.Hour, Segments: 4}
	if changed, err := c.LimiterConfig(ctx, "api", spec, false); !changed || err != nil {
		t.Fatalf("config: %v, %v", changed, err)
	}
	if ok, err := c.Limiter("api").AllowN(ctx, 2); !ok || err != nil {
		t.Fatalf("take 2: %v, %v", ok, err)
	}
	other := spec
	other.Limit = 50
	for _, bad := range []client.LimiterSpec{
		other,
		{Algorithm: "leaky", Limit: 1, Window: time.Second},
		{Algorithm: client.SlidingWindow, Limit: 1, Window: time.Second, Segments: 7},
		{Algorithm: client.TokenBucket, Limit: 1, Window: time.Second},
		{Algorithm: client.FixedWindow, Limit: 1, Window: time.Second, Queue: 1001},
	} {
		if _, err := c.LimiterConfig(ctx, "api", bad, false); !errors.Is(err, fence.ErrInvalidArgument) {
			t.Errorf("config %+v: %v, want invalid argument", bad, err)
		}
	}
	for _, n := range []uint64{6, 1 << 40} {
		if _, err := c.Limiter("api").ReserveN(ctx, n); !errors.Is(err, fence.ErrInvalidArgument) {
			t.Errorf("take %d: %v, want invalid argument", n, err)
		}
	}
	if _, err := c.Limiter("nope").Allow(ctx); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Errorf("take from an unconfigured limiter: %v", err)
	}
	if info, err := c.LimiterDescribe(ctx, "api"); err != nil || info.Spec != spec || info.Available != 3 {
		t.Fatalf("after the refusals: %+v, %v; want the first spec with 3 available", info, err)
	}
	if changed, err := c.LimiterConfig(ctx, "api", other, true); !changed || err != nil {
		t.Fatalf("replace: %v, %v", changed, err)
	}
	if info, err := c.LimiterDescribe(ctx, "api"); err != nil || info.Spec != other || info.Available != 50 {
		t.Fatalf("after replace: %+v, %v", info, err)
	}
}
