//go:build fencedfaults

package client_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/server"
)

// A server whose Pipeline does not name limiter takes (the old-pipeline
// test fault: a server that names nothing, 1, or the queue calls only, 2;
// both refuse a pipelined take) gets them unary from the SDK, over both
// protocols, and they behave as through the Pipeline: granted, granted,
// refused on a window of 2. Each take is counted unary (a refused
// pipelined take would fail the test instead).
func TestLimiter_FallsBackToUnaryForAnOlderPipeline(t *testing.T) {
	for _, old := range []int{1, 2} {
		for _, p := range []client.Protocol{client.ProtocolNative, client.ProtocolConnect} {
			t.Run(fmt.Sprintf("old-pipeline-%d/%s", old, p), func(t *testing.T) {
				c, ctx, unary := countingClient(t, p, "/fenced.v1.LimiterService/", func(c *server.Config) { c.Test.OldPipeline = old })
				if _, err := c.LimiterConfig(ctx, "window", client.LimiterSpec{Algorithm: client.FixedWindow, Limit: 2, Window: time.Minute}, false); err != nil {
					t.Fatal(err)
				}
				w := c.Limiter("window")
				for i, want := range []bool{true, true, false} {
					before := unary.Load()
					r, err := w.ReserveN(ctx, 1)
					if err != nil || r.OK != want || (!want && r.RetryAfter <= 0) {
						t.Fatalf("take %d of a window of 2: %+v, %v; want OK %v", i+1, r, err, want)
					}
					if n := unary.Load() - before; n != 1 {
						t.Fatalf("take %d: %d unary limiter calls, want 1", i+1, n)
					}
				}
			})
		}
	}
}
