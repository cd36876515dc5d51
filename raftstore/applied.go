package raftstore

import (
	"context"
	"sync"
	"sync/atomic"
)

// appliedIndex is the index of the last entry the state machine applied,
// with a notification for those waiting for it to reach an index. Advancing
// it costs one atomic store and one atomic load while nobody waits.
type appliedIndex struct {
	index   atomic.Uint64
	waiting atomic.Bool // a waiter holds advanced

	mu       sync.Mutex
	advanced chan struct{} // closed on the next advance; nil when none waits
}

// load returns the index.
func (a *appliedIndex) load() uint64 { return a.index.Load() }

// advance sets the index and wakes the waiters.
func (a *appliedIndex) advance(index uint64) {
	a.index.Store(index)
	if !a.waiting.Load() {
		return
	}
	a.mu.Lock()
	if a.advanced != nil {
		close(a.advanced)
		a.advanced = nil
		a.waiting.Store(false)
	}
	a.mu.Unlock()
}

// wait returns once the index is at least target, or ctx's error when ctx
// ends first, or ErrShutdown when done is closed first.
func (a *appliedIndex) wait(ctx context.Context, target uint64, done <-chan struct{}) error {
	for a.index.Load() < target {
		a.mu.Lock()
		if a.advanced == nil {
			a.advanced = make(chan struct{})
			a.waiting.Store(true)
		}
		ch := a.advanced
		a.mu.Unlock()
		// advance stores the index before it looks for waiters, and a
		// waiter registers before it looks at the index again, so one of
		// the two sees the other.
		if a.index.Load() >= target {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-done:
			return ErrShutdown
		}
	}
	return nil
}
