package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/testserver"
)

func queueClient(t *testing.T, opts ...testserver.Option) (*client.Client, context.Context) {
	t.Helper()
	srv := testserver.Start(t, opts...)
	c, err := client.New([]string{srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c, ctx
}

// TestQueue_WaitingClaimPushedAndKeptAlive: a waiting claim is handed the
// item a later push enqueues; the SDK keeps extending the claim past its
// visibility timeout while the handler runs, so nobody else gets it; the
// ack removes the item and a stale ack afterwards is refused.
func TestQueue_WaitingClaimPushedAndKeptAlive(t *testing.T) {
	c, ctx := queueClient(t)
	q := client.NewQueue(c, "jobs")
	a, err := c.NewSession(ctx, client.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.NewSession(ctx, client.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *client.Claim, 1)
	go func() {
		cl, err := q.Claim(ctx, a, time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- cl
	}()
	// The claim waits on the server before the push (no polling).
	deadline := time.Now().Add(30 * time.Second)
	for st, _ := q.Stats(ctx, 0, 0); st.Waiters != 1; st, _ = q.Stats(ctx, 0, 0) {
		if time.Now().After(deadline) {
			t.Fatal("the claim does not wait on the server")
		}
		time.Sleep(10 * time.Millisecond)
	}
	item, dup, err := q.Push(ctx, []byte("job-1"))
	if err != nil || dup {
		t.Fatalf("push: %d %v %v", item, dup, err)
	}
	cl := <-got
	if cl == nil || cl.Item != item || string(cl.Payload) != "job-1" || cl.Grant.Kind != fence.KindClaim || cl.Scope != fmt.Sprintf("jobs/%d", item) {
		t.Fatalf("claim: %+v", cl)
	}
	// Three visibility timeouts later the claim is still live: nobody
	// else can claim the item.
	time.Sleep(3 * time.Second)
	if cl.Context().Err() != nil {
		t.Fatalf("claim lost while kept alive: %v", context.Cause(cl.Context()))
	}
	if other, err := q.TryClaim(ctx, b, time.Second); !errors.Is(err, fence.ErrNotGranted) {
		t.Fatalf("a kept-alive claim's item was claimed again: %+v %v", other, err)
	}
	if err := cl.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.AckToken(ctx, item, cl.Token); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("second ack: %v, want stale", err)
	}
	if st, err := q.Stats(ctx, 0, 0); err != nil || st.Available+st.Claimed != 0 {
		t.Fatalf("stats after ack: %+v %v", st, err)
	}
}

// TestQueue_ClaimLostWhenSessionEnds: a claim hangs off its session; when
// the session is closed, the claim's context is cancelled and the item
// goes to the next worker with a higher token.
func TestQueue_ClaimLostWhenSessionEnds(t *testing.T) {
	c, ctx := queueClient(t)
	q := client.NewQueue(c, "jobs")
	a, _ := c.NewSession(ctx)
	b, _ := c.NewSession(ctx)
	if _, _, err := q.Push(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	first, err := q.Claim(ctx, a, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-first.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the claim's context was not cancelled when its session closed")
	}
	second, err := q.Claim(ctx, b, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if second.Item != first.Item || second.Token <= first.Token || second.Deliveries != 2 {
		t.Fatalf("second claim %+v after first %+v", second, first)
	}
	if err := first.Ack(ctx); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("late ack: %v, want stale", err)
	}
}

// TestQueue_ManyWorkersDistinctItems: workers claiming concurrently each
// get distinct items, every item is processed once, and the dedupe key
// makes a retried push enqueue once.
func TestQueue_ManyWorkersDistinctItems(t *testing.T) {
	c, ctx := queueClient(t)
	q := client.NewQueue(c, "work")
	const items, workers = 40, 8
	for i := 0; i < items; i++ {
		if _, _, err := q.Push(ctx, []byte(fmt.Sprint(i)), client.WithDedupeKey(fmt.Sprint("k", i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, dup, err := q.Push(ctx, []byte("again"), client.WithDedupeKey("k3")); err != nil || !dup {
		t.Fatalf("retried push: dup %v %v", dup, err)
	}
	var mu sync.Mutex
	seen := map[uint64]int{}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := c.NewSession(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			for {
				cl, err := q.TryClaim(ctx, s, 5*time.Second)
				if errors.Is(err, fence.ErrNotGranted) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				seen[cl.Item]++
				mu.Unlock()
				if err := cl.Ack(ctx); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if len(seen) != items {
		t.Fatalf("%d distinct items processed, want %d", len(seen), items)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("item %d processed %d times", id, n)
		}
	}
}

// BenchmarkQueue_PushClaimAck measures push → claim → ack through the SDK
// on one node, with 16 workers (each with its own session) claiming
// concurrently: items/s is the whole cycle.
func BenchmarkQueue_PushClaimAck(b *testing.B) {
	srv := testserver.Start(b)
	c, err := client.New([]string{srv.Addr()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	q := client.NewQueue(c, "bench")
	const workers = 16
	sessions := make([]*client.Session, workers)
	for i := range sessions {
		if sessions[i], err = c.NewSession(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	per := b.N/workers + 1
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(s *client.Session) {
			defer wg.Done()
			for i := 0; i < per; i++ {
				if _, _, err := q.Push(ctx, []byte("x")); err != nil {
					b.Error(err)
					return
				}
				cl, err := q.Claim(ctx, s, 10*time.Second)
				if err != nil {
					b.Error(err)
					return
				}
				if err := cl.Ack(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		}(sessions[w])
	}
	wg.Wait()
	b.ReportMetric(float64(per*workers)/time.Since(start).Seconds(), "items/s")
}
