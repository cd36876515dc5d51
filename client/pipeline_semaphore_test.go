package client_test

import (
	"errors"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
)

// A current server's Pipeline names semaphore calls in its first
// response, and the SDK sends acquires and releases there, over both
// protocols: two sessions take a semaphore of 2, a third's TryAcquire is
// refused, its Acquire waits and is granted when a holder releases, and
// the releases send no unary SemaphoreService call. The control:
// DescribeSemaphore, always unary, is counted.
func TestSemaphore_UsesTheCurrentServersPipeline(t *testing.T) {
	for _, p := range []client.Protocol{client.ProtocolNative, client.ProtocolConnect} {
		t.Run(p.String(), func(t *testing.T) {
			c, ctx, unary := countingClient(t, p, "/fenced.v1.SemaphoreService/")
			var sems []*client.Semaphore
			for range 3 {
				s, err := c.NewSession(ctx, client.WithTTL(5*time.Second))
				if err != nil {
					t.Fatal(err)
				}
				sems = append(sems, client.NewSemaphore(s, "pool", 2))
			}
			p1, err := sems[0].Acquire(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			p2, err := sems[1].Acquire(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sems[2].TryAcquire(ctx, 1); !errors.Is(err, fence.ErrNotGranted) {
				t.Fatalf("a third TryAcquire of a semaphore of 2: %v, want ErrNotGranted", err)
			}
			got := make(chan error, 1)
			var p3 *client.Permits
			go func() {
				var err error
				p3, err = sems[2].Acquire(ctx, 1)
				got <- err
			}()
			time.Sleep(100 * time.Millisecond)
			if err := p1.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatalf("the waiting acquire: %v", err)
			}
			if p3.List()[0].Token <= p2.List()[0].Token {
				t.Fatalf("the waiter's token %d is not above the last grant's %d", p3.List()[0].Token, p2.List()[0].Token)
			}
			for _, ps := range []*client.Permits{p2, p3} {
				if err := ps.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if n := unary.Load(); n != 0 {
				t.Fatalf("%d semaphore calls went unary to a server whose Pipeline takes them", n)
			}
			st, err := c.DescribeSemaphore(ctx, "pool")
			if err != nil || len(st.Holders) != 0 {
				t.Fatalf("describe after every release: %+v, %v", st, err)
			}
			if n := unary.Load(); n != 1 {
				t.Fatalf("after DescribeSemaphore: %d unary semaphore calls counted, want 1", n)
			}
		})
	}
}
