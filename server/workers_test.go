package server

import (
	"sync"
	"testing"
	"time"
)

// TestWorkers_RunConcurrentlyAndAreReused tries to make a call wait for
// another: 64 functions that each wait until all 64 are running must all
// get a worker at once (a pool that queued them would never finish), and
// once they are done, further functions run on the kept workers.
func TestWorkers_RunConcurrentlyAndAreReused(t *testing.T) {
	w := newWorkers()
	const n = 64
	for round := range 3 {
		var started, done sync.WaitGroup
		started.Add(n)
		done.Add(n)
		all := make(chan struct{})
		for range n {
			w.run(func() {
				defer done.Done()
				started.Done()
				<-all
			})
		}
		waited := make(chan struct{})
		go func() { started.Wait(); close(waited) }()
		select {
		case <-waited:
		case <-time.After(time.Minute):
			t.Fatalf("round %d: not all %d functions ran at once", round, n)
		}
		close(all)
		done.Wait()
	}
}

// TestWorkers_IdleWorkerTakesTheNextCall checks that a worker that has
// finished waits for the next function (the point of keeping it): a send
// on the work channel, which only a waiting worker receives, must be
// taken.
func TestWorkers_IdleWorkerTakesTheNextCall(t *testing.T) {
	w := newWorkers()
	ran := make(chan struct{})
	w.run(func() { close(ran) })
	<-ran
	// The worker is now idle, or about to be: it must take a function.
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		select {
		case w.work <- func() {}:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatal("no idle worker took a function within a minute")
}
