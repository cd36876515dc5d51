package server

import (
	"sync"

	fence "github.com/fenced-dev/fenced"
)

// waitKey names a queued acquire: one session waiting for one lock.
type waitKey struct {
	name    string
	session uint64
}

// waitOutcome is pushed to a waiting call when its wait ends: granted, or
// removed from the queue (session ended or wait cancelled).
type waitOutcome struct {
	granted bool
	grant   fence.Grant
}

// waits routes grants applied by the state machine to the acquire calls
// waiting for them. Notifications never block the applying goroutine: each
// waiter's channel has room for the one outcome it can receive.
type waits struct {
	mu      sync.Mutex
	waiting map[waitKey][]chan waitOutcome
}

func newWaits() *waits {
	return &waits{waiting: make(map[waitKey][]chan waitOutcome)}
}

// add registers a waiter. Call remove when the wait ends.
func (w *waits) add(k waitKey) chan waitOutcome {
	ch := make(chan waitOutcome, 1)
	w.mu.Lock()
	w.waiting[k] = append(w.waiting[k], ch)
	w.mu.Unlock()
	return ch
}

func (w *waits) remove(k waitKey, ch chan waitOutcome) {
	w.mu.Lock()
	defer w.mu.Unlock()
	list := w.waiting[k]
	for i, c := range list {
		if c == ch {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(w.waiting, k)
	} else {
		w.waiting[k] = list
	}
}

// notify delivers an outcome to every call waiting on k.
func (w *waits) notify(k waitKey, out waitOutcome) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ch := range w.waiting[k] {
		select {
		case ch <- out:
		default: // already has its outcome
		}
	}
}
