package client_test

import (
	"testing"
	"time"

	"github.com/fenced-dev/fenced/client"
)

// A current server's Pipeline names read/write lock calls in its first
// response, and the SDK sends acquires and releases there, over both
// protocols: two readers share the lock, a writer's Lock waits and is
// granted when both unlock, with a token above theirs, and no unary
// RWLockService call is sent. The control: DescribeRWLock, always unary,
// is counted.
func TestRWMutex_UsesTheCurrentServersPipeline(t *testing.T) {
	for _, p := range []client.Protocol{client.ProtocolNative, client.ProtocolConnect} {
		t.Run(p.String(), func(t *testing.T) {
			c, ctx, unary := countingClient(t, p, "/fenced.v1.RWLockService/")
			var ms []*client.RWMutex
			for range 3 {
				s, err := c.NewSession(ctx, client.WithTTL(5*time.Second))
				if err != nil {
					t.Fatal(err)
				}
				ms = append(ms, client.NewRWMutex(s, "doc"))
			}
			r1, err := ms[0].RLock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			r2, err := ms[1].RLock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan error, 1)
			var w *client.RWGrant
			go func() {
				var err error
				w, err = ms[2].Lock(ctx)
				got <- err
			}()
			time.Sleep(100 * time.Millisecond)
			for _, m := range ms[:2] {
				if err := m.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if err := <-got; err != nil {
				t.Fatalf("the waiting writer: %v", err)
			}
			if w.Token() <= max(r1.Token(), r2.Token()) {
				t.Fatalf("the writer's token %d is not above the readers' %d and %d", w.Token(), r1.Token(), r2.Token())
			}
			if err := ms[2].Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if n := unary.Load(); n != 0 {
				t.Fatalf("%d read/write lock calls went unary to a server whose Pipeline takes them", n)
			}
			if _, err := c.DescribeRWLock(ctx, "doc"); err != nil {
				t.Fatal(err)
			}
			if n := unary.Load(); n != 1 {
				t.Fatalf("after DescribeRWLock: %d unary read/write lock calls counted, want 1", n)
			}
		})
	}
}
