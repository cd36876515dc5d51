package httpfence_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard/guardtest"
	"github.com/fenced-dev/fenced/httpfence"
)

// TestKeys_Refresh: a Keys picks up a rotated key when a grant names it,
// at most once per MinRefresh however many such grants arrive, keeps the
// old set when a load fails, and fails to start without a first load.
func TestKeys_Refresh(t *testing.T) {
	old, rotated := guardtest.NewIssuer("cluster-a", 1), guardtest.NewIssuer("cluster-a", 2)
	var mu sync.Mutex
	doc, _ := old.Keys().MarshalJSON()
	failing := false
	var fetches atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		mu.Lock()
		defer mu.Unlock()
		if failing {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Write(doc)
	}))
	defer srv.Close()
	ctx := context.Background()
	if _, err := httpfence.LoadKeys(ctx, srv.URL+"/nothing-here", httpfence.KeysConfig{Client: &http.Client{Transport: failingTransport{}}}); err == nil {
		t.Fatal("LoadKeys without a first load succeeded")
	}
	clock := &fakeClock{t: time.Unix(1_000_000, 0)}
	keys, err := httpfence.LoadKeys(ctx, srv.URL, httpfence.KeysConfig{MinRefresh: time.Minute, MaxAge: time.Hour, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keys.VerifyGrant(old.Sign(t, "orders", 1)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	doc, _ = rotated.Keys().MarshalJSON()
	mu.Unlock()
	if _, err := keys.VerifyGrant(rotated.Sign(t, "orders", 2)); !errors.Is(err, fence.ErrInvalidGrant) {
		t.Fatalf("an unknown key within MinRefresh of the first load: %v, want refused without a load", err)
	}
	clock.add(2 * time.Minute)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keys.VerifyGrant(rotated.Sign(t, "orders", 2))
		}()
	}
	wg.Wait()
	if _, err := keys.VerifyGrant(rotated.Sign(t, "orders", 2)); err != nil {
		t.Fatalf("a grant of the rotated key: %v", err)
	}
	if n := fetches.Load(); n != 2 {
		t.Fatalf("%d loads, want 2 (the first and one for the unknown key)", n)
	}
	// More unknown key ids within MinRefresh load nothing.
	stranger := guardtest.NewIssuer("cluster-a", 3)
	for range 5 {
		if _, err := keys.VerifyGrant(stranger.Sign(t, "orders", 3)); !errors.Is(err, fence.ErrInvalidGrant) {
			t.Fatalf("a grant of an unpublished key: %v", err)
		}
	}
	if n := fetches.Load(); n != 2 {
		t.Fatalf("%d loads after unknown key ids within MinRefresh, want still 2", n)
	}
	// A set older than MaxAge is loaded again for a known key too.
	clock.add(2 * time.Hour)
	if _, err := keys.VerifyGrant(rotated.Sign(t, "orders", 3)); err != nil || fetches.Load() != 3 {
		t.Fatalf("after MaxAge: %v, %d loads; want a third load", err, fetches.Load())
	}
	mu.Lock()
	failing = true
	mu.Unlock()
	if err := keys.Refresh(ctx); err == nil {
		t.Fatal("Refresh from a failing server succeeded")
	}
	if _, err := keys.VerifyGrant(rotated.Sign(t, "orders", 4)); err != nil || keys.Set().Current() != rotated.KeyID {
		t.Fatalf("after a failed load: %v, current %s; want the set loaded before", err, keys.Set().Current())
	}
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type failingTransport struct{}

func (failingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("unreachable")
}
