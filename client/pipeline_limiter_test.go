package client_test

import (
	"testing"
	"time"

	"github.com/fenced-dev/fenced/client"
)

// A current server's Pipeline names limiter takes in its first response,
// and the SDK sends them there, over both protocols: Allow on a window of
// 2 (granted, granted, refused with a retry-after) and a Wait that waits
// in a bucket's queue send no unary LimiterService call. The controls:
// Config and Describe, always unary, are counted.
func TestLimiter_UsesTheCurrentServersPipeline(t *testing.T) {
	for _, p := range []client.Protocol{client.ProtocolNative, client.ProtocolConnect} {
		t.Run(p.String(), func(t *testing.T) {
			c, ctx, unary := countingClient(t, p, "/fenced.v1.LimiterService/")
			if _, err := c.LimiterConfig(ctx, "window", client.LimiterSpec{Algorithm: client.FixedWindow, Limit: 2, Window: time.Minute}, false); err != nil {
				t.Fatal(err)
			}
			if _, err := c.LimiterConfig(ctx, "bucket", client.LimiterSpec{Algorithm: client.TokenBucket, Limit: 1, Rate: 1, Window: time.Second, Queue: 1}, false); err != nil {
				t.Fatal(err)
			}
			if n := unary.Load(); n != 2 {
				t.Fatalf("after two Configs: %d unary limiter calls counted, want 2 (the counter does not count)", n)
			}
			w := c.Limiter("window")
			for i, want := range []bool{true, true, false} {
				r, err := w.ReserveN(ctx, 1)
				if err != nil || r.OK != want || (!want && r.RetryAfter <= 0) {
					t.Fatalf("take %d of a window of 2: %+v, %v; want OK %v", i+1, r, err, want)
				}
			}
			b := c.Limiter("bucket")
			if ok, err := b.Allow(ctx); !ok || err != nil {
				t.Fatalf("the bucket's one token: %v, %v", ok, err)
			}
			start := time.Now()
			if err := b.Wait(ctx); err != nil {
				t.Fatal(err)
			}
			if el := time.Since(start); el < 900*time.Millisecond {
				t.Fatalf("a Wait on an empty bucket refilled every 1s returned after %v: it did not wait in the queue", el)
			}
			if n := unary.Load(); n != 2 {
				t.Fatalf("%d limiter takes went unary to a server whose Pipeline takes them", n-2)
			}
			if _, err := c.LimiterDescribe(ctx, "window"); err != nil {
				t.Fatal(err)
			}
			if n := unary.Load(); n != 3 {
				t.Fatalf("after Describe: %d unary limiter calls counted, want 3", n)
			}
		})
	}
}
