package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/testserver"
)

func slots(ps *client.Permits) []int {
	var out []int
	for _, p := range ps.List() {
		out = append(out, p.Slot)
	}
	return out
}

// Permits come with their own tokens and the lowest free slots; a try that
// does not fit is not granted; a capacity other than the one in use is
// refused with both numbers; Release frees the slots for the next holder,
// under higher tokens, and cancels the permits' Context.
func TestSemaphore_AcquireTryRelease(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, []string{srv.Addr()})
	s1, s2, s3 := newSession(t, c), newSession(t, c), newSession(t, c)
	ctx := testCtx(t)

	p1, err := client.NewSemaphore(s1, "pool", 3).Acquire(ctx, 2)
	if err != nil {
		t.Fatalf("Acquire(2): %v", err)
	}
	if fmt.Sprint(slots(p1)) != "[0 1]" {
		t.Fatalf("slots %v, want [0 1]", slots(p1))
	}
	l := p1.List()
	if l[0].Token >= l[1].Token || l[1].Grant.Kind != fence.KindPermit || l[1].Grant.Scope != "pool/1" || l[1].Scope() != "pool/1" || l[1].Grant.Session != s1.ID() {
		t.Fatalf("permits %+v", l)
	}
	_, err = client.NewSemaphore(s2, "pool", 3).TryAcquire(ctx, 2)
	if !errors.Is(err, fence.ErrNotGranted) {
		t.Fatalf("TryAcquire(2) with 1 free: %v, want not granted", err)
	}
	_, err = client.NewSemaphore(s2, "pool", 5).TryAcquire(ctx, 1)
	if !errors.Is(err, fence.ErrCapacityMismatch) || !strings.Contains(err.Error(), "capacity 3") || !strings.Contains(err.Error(), "capacity 5") {
		t.Fatalf("TryAcquire with capacity 5: %v, want a capacity mismatch naming 3 and 5", err)
	}
	if _, err := client.NewSemaphore(s2, "pool", 3).Acquire(ctx, 4); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Fatalf("Acquire(4) of capacity 3: %v, want invalid argument", err)
	}
	p2, err := client.NewSemaphore(s2, "pool", 3).TryAcquire(ctx, 1)
	if err != nil || fmt.Sprint(slots(p2)) != "[2]" {
		t.Fatalf("TryAcquire(1): %v %v, want slot 2", err, p2)
	}
	if err := p1.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if !errors.Is(context.Cause(p1.Context()), client.ErrNotHeld) {
		t.Fatalf("Context after Release: %v", context.Cause(p1.Context()))
	}
	p3, err := client.NewSemaphore(s3, "pool", 3).TryAcquire(ctx, 2)
	if err != nil || fmt.Sprint(slots(p3)) != "[0 1]" || p3.List()[0].Token <= p2.List()[0].Token {
		t.Fatalf("TryAcquire after the release: %v %+v", err, p3)
	}
	st, err := c.DescribeSemaphore(ctx, "pool")
	if err != nil || st.Capacity != 3 || st.Held != 3 || len(st.Holders) != 3 {
		t.Fatalf("DescribeSemaphore: %+v %v", st, err)
	}
}

// A waiting Acquire is pushed its permits when they free up, in arrival
// order, with a big request at the head served before a smaller one
// behind it; an Acquire whose context ends while it waits leaves no
// waiter behind.
func TestSemaphore_WaitPushedFIFO(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, []string{srv.Addr()})
	holder, big, small, quitter := newSession(t, c), newSession(t, c), newSession(t, c), newSession(t, c)
	ctx := testCtx(t)
	hp, err := client.NewSemaphore(holder, "pool", 3).Acquire(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 2)
	waitFor := func(who string, s *client.Session, k int) {
		go func() {
			p, err := client.NewSemaphore(s, "pool", 3).Acquire(ctx, k)
			if err != nil {
				got <- who + ": " + err.Error()
				return
			}
			got <- fmt.Sprintf("%s %v", who, slots(p))
			if who == "big" {
				p.Release(ctx)
			}
		}()
	}
	waitFor("big", big, 3)
	waitQueued(t, c, "pool", 1)
	waitFor("small", small, 1) // one permit is free, but big waits first
	waitQueued(t, c, "pool", 2)

	// An Acquire given up while it waits withdraws its wait.
	qctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = client.NewSemaphore(quitter, "pool", 3).Acquire(qctx, 1)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire with a short context: %v", err)
	}
	if st, _ := c.DescribeSemaphore(ctx, "pool"); st.WaiterCount != 2 {
		t.Fatalf("waiters after the give-up: %+v, want big and small only", st.Waiters)
	}
	select {
	case g := <-got:
		t.Fatalf("granted while the holder holds 2 of 3: %s", g)
	default:
	}
	if err := hp.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if g := <-got; g != "big [0 1 2]" {
		t.Fatalf("first served: %s, want big with all 3 slots", g)
	}
	if g := <-got; g != "small [0]" {
		t.Fatalf("second served: %s, want small slot 0", g)
	}
}

func waitQueued(t *testing.T, c *client.Client, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		st, err := c.DescribeSemaphore(testCtx(t), name)
		if err == nil && st.WaiterCount == n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%q never had %d waiters", name, n)
}

// Permits hang off their session: closing it ends them, cancels their
// Context and frees the slots.
func TestSemaphore_SessionEndEndsPermits(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, []string{srv.Addr()})
	s := newSession(t, c)
	ctx := testCtx(t)
	p, err := client.NewSemaphore(s, "pool", 2).Acquire(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed after the session closed")
	}
	if st, err := c.DescribeSemaphore(ctx, "pool"); err != nil || st.Capacity != 0 {
		t.Fatalf("after the close: %+v %v, want not in use", st, err)
	}
}
