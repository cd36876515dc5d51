package server

import "time"

// workerIdle is how long a call worker waits for another call before it
// ends.
const workerIdle = 5 * time.Second

// workers runs functions on goroutines that are kept for the next
// function once they finish, for workerIdle. A fresh goroutine starts with
// a small stack and grows it, copying it each time, on the way to a deep
// call (signing a grant with Ed25519, hashing a session secret); in the
// profile of a lock cycle that copying cost about as much as the Raft
// proposal. A kept goroutine keeps its grown stack (until a garbage
// collection finds it mostly unused), so a busy server pays for growing it
// once per worker rather than once per call. The number of workers is not
// bounded here: there is at most one per call in flight, as with a
// goroutine per call.
type workers struct {
	work chan func()
}

func newWorkers() *workers {
	return &workers{work: make(chan func())}
}

// run runs f on an idle worker, or on a new one when none is idle. It does
// not wait for f.
func (w *workers) run(f func()) {
	select {
	case w.work <- f:
	default:
		go w.loop(f)
	}
}

// loop runs f, then whatever run hands it, until it has been idle for
// workerIdle.
func (w *workers) loop(f func()) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		f()
		f = nil
		idle.Reset(workerIdle)
		select {
		case f = <-w.work:
		case <-idle.C:
			return
		}
	}
}
