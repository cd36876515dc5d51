//go:build fencedfaults

package client_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/server"
)

// A server whose Pipeline does not name semaphore calls (the old-pipeline
// test fault, 1 and 2; both refuse them pipelined) gets acquires and
// releases unary from the SDK, over both protocols, and they behave: an
// acquire granted, a second session's waiting acquire granted when the
// first releases. Every acquire and release is counted unary (a refused
// pipelined call would fail the test instead).
func TestSemaphore_FallsBackToUnaryForAnOlderPipeline(t *testing.T) {
	for _, old := range []int{1, 2} {
		for _, p := range []client.Protocol{client.ProtocolNative, client.ProtocolConnect} {
			t.Run(fmt.Sprintf("old-pipeline-%d/%s", old, p), func(t *testing.T) {
				c, ctx, unary := countingClient(t, p, "/fenced.v1.SemaphoreService/", func(c *server.Config) { c.Test.OldPipeline = old })
				var sems []*client.Semaphore
				for range 2 {
					s, err := c.NewSession(ctx, client.WithTTL(5*time.Second))
					if err != nil {
						t.Fatal(err)
					}
					sems = append(sems, client.NewSemaphore(s, "pool", 1))
				}
				p1, err := sems[0].Acquire(ctx, 1)
				if err != nil {
					t.Fatal(err)
				}
				got := make(chan error, 1)
				var p2 *client.Permits
				go func() {
					var err error
					p2, err = sems[1].Acquire(ctx, 1)
					got <- err
				}()
				time.Sleep(100 * time.Millisecond)
				if err := p1.Release(ctx); err != nil {
					t.Fatal(err)
				}
				if err := <-got; err != nil {
					t.Fatalf("the waiting acquire: %v", err)
				}
				if err := p2.Release(ctx); err != nil {
					t.Fatal(err)
				}
				if n := unary.Load(); n != 4 {
					t.Fatalf("%d unary semaphore calls, want 4 (two acquires, two releases)", n)
				}
			})
		}
	}
}
