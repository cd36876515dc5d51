package server

import (
	"context"
	"sync/atomic"
	"time"
)

// workerIdle is how long a call worker is kept without being needed: a
// sweep every workerIdle ends the workers that none of the calls since
// the last sweep needed, so an idle worker ends within two workerIdle.
const workerIdle = 5 * time.Second

// workers runs functions on goroutines that are kept for the next
// function once they finish, while the load needs them. A fresh goroutine
// starts with a small stack and grows it, copying it each time, on the
// way to a deep call (signing a grant with Ed25519, hashing a session
// secret); in the profile of a lock cycle that copying cost about as much
// as the Raft proposal. A kept goroutine keeps its grown stack (until a
// garbage collection finds it mostly unused), so a busy server pays for
// growing it once per worker rather than once per call. The number of
// workers is not bounded here: there is at most one per call in flight,
// as with a goroutine per call.
//
// A waiting worker has no timer of its own: it waits on the work channel
// (and stop) alone, and sweep ends the workers the load did not need. In
// the profile of 64 independent clients a timer reset and a select on it
// per call cost about 2 % of the server's CPU.
type workers struct {
	work chan func() // a nil function ends the worker that takes it
	stop chan struct{}
	// idle counts the workers waiting for a function; low is the fewest
	// that waited at once since the last sweep: that many were not
	// needed all along.
	idle, low atomic.Int64
	live      atomic.Int64 // workers running or waiting, for tests
}

func newWorkers() *workers {
	return &workers{work: make(chan func()), stop: make(chan struct{})}
}

// run runs f on an idle worker, or on a new one when none is idle. It does
// not wait for f.
func (w *workers) run(f func()) {
	select {
	case w.work <- f:
	default:
		w.live.Add(1)
		go w.loop(f)
	}
}

// loop runs f, then whatever run hands it, until a sweep ends it or the
// workers stop.
func (w *workers) loop(f func()) {
	defer w.live.Add(-1)
	for {
		f()
		w.idle.Add(1)
		select {
		case f = <-w.work:
		case <-w.stop:
			w.idle.Add(-1)
			return
		}
		n := w.idle.Add(-1)
		for l := w.low.Load(); n < l && !w.low.CompareAndSwap(l, n); l = w.low.Load() {
		}
		if f == nil {
			return
		}
	}
}

// sweep ends, every interval, the workers that were idle all through it
// (sweepOnce), until ctx ends; then it stops every worker once its
// function returns.
func (w *workers) sweep(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			close(w.stop)
			return
		case <-t.C:
			w.sweepOnce()
		}
	}
}

// sweepOnce ends as many idle workers as were idle all along since the
// last sweep, and starts the count again.
func (w *workers) sweepOnce() {
	for unneeded := w.low.Swap(w.idle.Load()); unneeded > 0; unneeded-- {
		select {
		case w.work <- nil:
		default:
			return // none is waiting: the load took them meanwhile
		}
	}
}
