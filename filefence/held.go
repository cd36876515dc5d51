package filefence

import (
	"context"
	"sync"
)

// heldKey is the context key of the lock a fenced step holds.
type heldKey struct{}

// held is the lock of one name, held by a fenced step (Dir.Do, Write,
// Remove) while it runs apply. The calls apply makes with its context for
// the same name and Dir run under it instead of waiting for it, one at a
// time (mu).
type held struct {
	d    *Dir
	name string
	// outer is the enclosing step's held lock, for another name, if any.
	outer any
	mu    sync.Mutex
	// released is set, under mu, when the step is over and the lock is
	// about to be released: a context kept past the step holds nothing.
	released bool
}

// heldFrom returns the lock of name of d held by the step whose context
// is ctx, or nil.
func heldFrom(ctx context.Context, d *Dir, name string) *held {
	for v := ctx.Value(heldKey{}); v != nil; {
		h := v.(*held)
		if h.d == d && h.name == name {
			return h
		}
		v = h.outer
	}
	return nil
}

// enter takes h for a nested call and reports whether the lock is still
// held; when it reports true the caller runs its step (with a held of its
// own for the calls nested in it) and then unlocks mu.
func (h *held) enter() bool {
	h.mu.Lock()
	if h.released {
		h.mu.Unlock()
		return false
	}
	return true
}

// release marks the step over, waiting for nested calls in progress.
func (h *held) release() {
	h.mu.Lock()
	h.released = true
	h.mu.Unlock()
}
