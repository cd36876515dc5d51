package pggrant_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
)

// PostgreSQL restarted abruptly (immediate shutdown, crash recovery) in
// the middle of a load of acquires and releases on a few names: every
// grant's token, in grant order per name, is above the one before, and
// grants go on after the restart.
func TestGrantor_RestartUnderLoad(t *testing.T) {
	ctx := testCtx(t)
	names := []string{fmt.Sprintf("load-a-%d", time.Now().UnixNano()), fmt.Sprintf("load-b-%d", time.Now().UnixNano())}
	var (
		mu      sync.Mutex
		last    = map[string]fence.Token{}
		holding = map[string]bool{}
		grants  atomic.Int64
		after   atomic.Int64 // grants since the restart
		failed  atomic.Int64 // acquires or releases that failed (during the restart)
		stop    atomic.Bool
		errs    = make(chan error, 16)
		wg      sync.WaitGroup
	)
	restarted := atomic.Bool{}
	for w := range 4 {
		g := open(t, pgAddr())
		name := names[w%len(names)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				h, err := g.Acquire(ctx, name, fence.Wait(), fence.WithTTL(2*time.Second))
				if err != nil {
					failed.Add(1)
					time.Sleep(50 * time.Millisecond) // PostgreSQL is down: back off
					continue
				}
				tok := h.Grant().Token
				mu.Lock()
				if holding[name] {
					errs <- fmt.Errorf("%q granted with token %d while held", name, tok)
				}
				if tok <= last[name] {
					errs <- fmt.Errorf("%q granted with token %d after token %d", name, tok, last[name])
				}
				holding[name], last[name] = true, tok
				mu.Unlock()
				grants.Add(1)
				if restarted.Load() {
					after.Add(1)
				}
				time.Sleep(2 * time.Millisecond)
				mu.Lock()
				holding[name] = false
				mu.Unlock()
				if _, err := h.Release(ctx); err != nil {
					failed.Add(1) // the grant ends with its TTL
				}
			}
		}()
	}
	waitFor(t, "grants before the restart", func() bool { return grants.Load() >= 50 })
	before := grants.Load()
	if err := pg.Restart(); err != nil {
		t.Fatal(err)
	}
	restarted.Store(true)
	waitFor(t, "grants after the restart", func() bool { return after.Load() >= 50 })
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d grants before the restart, %d after; %d calls failed around it; last tokens %v", before, after.Load(), failed.Load(), last)
}

// waitFor waits until cond holds, checking every 10ms, at most 45s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
