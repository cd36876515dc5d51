package server

import (
	"context"
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

// TestWorkers_SweepEndsIdleWorkers: a sweep ends the workers that no
// call needed since the sweep before (so an idle worker ends within two
// sweeps), and keeps those a call took meanwhile; once the sweep's
// context ends, every worker ends as soon as it is idle, and one started
// later ends after its function.
func TestWorkers_SweepEndsIdleWorkers(t *testing.T) {
	w := newWorkers()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d workers live, %d idle after a minute", what, w.live.Load(), w.idle.Load())
			}
			time.Sleep(time.Millisecond)
		}
	}
	start := func(n int) {
		var done sync.WaitGroup
		done.Add(n)
		all := make(chan struct{})
		for range n {
			w.run(func() { defer done.Done(); <-all })
		}
		close(all)
		done.Wait()
	}
	start(3)
	waitFor("3 idle", func() bool { return w.idle.Load() == 3 })
	w.sweepOnce() // the first sweep: no interval behind it yet
	if got := w.live.Load(); got != 3 {
		t.Fatalf("%d workers live after the first sweep, want 3", got)
	}
	w.sweepOnce() // no call since: all 3 were unneeded
	waitFor("every idle worker ended", func() bool { return w.live.Load() == 0 })

	start(2)
	waitFor("2 idle", func() bool { return w.idle.Load() == 2 })
	w.sweepOnce()
	ran := make(chan struct{})
	w.run(func() { close(ran) }) // takes one of the two
	<-ran
	waitFor("2 idle again", func() bool { return w.idle.Load() == 2 })
	w.sweepOnce() // one was needed meanwhile: only the other ends
	waitFor("one worker ended", func() bool { return w.live.Load() == 1 })
	time.Sleep(10 * time.Millisecond)
	if got := w.live.Load(); got != 1 {
		t.Fatalf("%d workers live after a sweep with one of two needed, want 1", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	swept := make(chan struct{})
	go func() { w.sweep(ctx, time.Hour); close(swept) }()
	block := make(chan struct{})
	w.run(func() { <-block }) // running when the workers stop
	cancel()
	<-swept
	waitFor("the idle worker after the stop", func() bool { return w.live.Load() == 1 })
	close(block)
	waitFor("the running worker after the stop", func() bool { return w.live.Load() == 0 })
	w.run(func() {})
	waitFor("a worker started after the stop", func() bool { return w.live.Load() == 0 })
}
