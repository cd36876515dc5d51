package client_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/testserver"
)

// A call on the Pipeline that gives up at its deadline with nothing
// received since it was sent does not take down the other calls waiting
// on the same stream: a semaphore acquire waiting in the queue keeps its
// place (it is never retried) while a Lock with a 300 ms context on a
// held lock gives up, over both protocols. Before the stream was probed
// first, it was given up at once, the server cancelled the waiting
// acquire with it, and the SDK sent it again, at the back of the queue.
func TestPipeline_AGivenUpCallLeavesTheOtherWaitsInPlace(t *testing.T) {
	for _, p := range []client.Protocol{client.ProtocolNative, client.ProtocolConnect} {
		t.Run(p.String(), func(t *testing.T) {
			srv := testserver.Start(t)
			var (
				mu      sync.Mutex
				retried []string
			)
			hooks := client.Hooks{Retry: func(op, _ string, _ int, err error) {
				mu.Lock()
				retried = append(retried, op+": "+err.Error())
				mu.Unlock()
			}}
			c := newClient(t, []string{srv.Addr()}, client.WithProtocol(p), client.WithHooks(hooks))
			ctx := testCtx(t)
			holder, waiter, quitter := newSession(t, c), newSession(t, c), newSession(t, c)
			if err := client.NewMutex(holder, "busy").Lock(ctx); err != nil {
				t.Fatal(err)
			}
			held, err := client.NewSemaphore(holder, "pool", 1).Acquire(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan error, 1)
			go func() {
				ps, err := client.NewSemaphore(waiter, "pool", 1).Acquire(ctx, 1)
				if err == nil {
					err = ps.Release(ctx)
				}
				got <- err
			}()
			waitQueued(t, c, "pool", 1)

			for range 3 {
				qctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				err := client.NewMutex(quitter, "busy").Lock(qctx)
				cancel()
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Lock of a held lock with a 300 ms context: %v", err)
				}
			}
			time.Sleep(probeSettles)
			if err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatalf("the waiting acquire: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, r := range retried {
				if len(r) >= 8 && r[:8] == "acquire:" {
					t.Fatalf("the waiting acquire was sent again (%v): the stream was given up under it", retried)
				}
			}
		})
	}
}

// probeSettles is longer than a probe of the stream takes to give up.
const probeSettles = 1500 * time.Millisecond
