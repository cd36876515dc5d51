//go:build fencedfaults

package client_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/server"
)

// A server whose Pipeline does not name read/write lock calls (the
// old-pipeline test fault, 1 and 2; both refuse them pipelined) gets
// acquires and releases unary from the SDK, over both protocols, and they
// behave: a read grant, then a write grant once it is unlocked. Every
// acquire and release is counted unary (a refused pipelined call would
// fail the test instead).
func TestRWMutex_FallsBackToUnaryForAnOlderPipeline(t *testing.T) {
	for _, old := range []int{1, 2} {
		for _, p := range []client.Protocol{client.ProtocolNative, client.ProtocolConnect} {
			t.Run(fmt.Sprintf("old-pipeline-%d/%s", old, p), func(t *testing.T) {
				c, ctx, unary := countingClient(t, p, "/fenced.v1.RWLockService/", func(c *server.Config) { c.Test.OldPipeline = old })
				s, err := c.NewSession(ctx, client.WithTTL(5*time.Second))
				if err != nil {
					t.Fatal(err)
				}
				m := client.NewRWMutex(s, "doc")
				r, err := m.RLock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := m.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				w, err := m.Lock(ctx)
				if err != nil || w.Token() <= r.Token() {
					t.Fatalf("write lock after the read: %v, %v", w, err)
				}
				if err := m.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				if n := unary.Load(); n != 4 {
					t.Fatalf("%d unary read/write lock calls, want 4 (two acquires, two releases)", n)
				}
			})
		}
	}
}
