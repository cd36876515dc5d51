// Package turns queues one process's waiters for a name in arrival order,
// for the library grantors (pggrant, redisgrant): only the head waiter
// asks the store, and when it is granted or gives up, the next one becomes
// the head. Waiters of one process thus take a name first come, first
// served, and a release wakes one request per process rather than one per
// waiter. Between processes there is no order: their head waiters race.
package turns

import "sync"

// Queue is the waiters of one process, by name. Its zero value is ready to
// use; it is safe for concurrent use.
type Queue struct {
	mu sync.Mutex
	q  map[string][]chan struct{}
}

// Join queues a waiter for name. The channel is closed when it is the
// head; leave removes it (and hands the turn on if it was the head). Call
// leave exactly once.
func (t *Queue) Join(name string) (head <-chan struct{}, leave func()) {
	c := make(chan struct{})
	t.mu.Lock()
	if t.q == nil {
		t.q = map[string][]chan struct{}{}
	}
	t.q[name] = append(t.q[name], c)
	if len(t.q[name]) == 1 {
		close(c)
	}
	t.mu.Unlock()
	return c, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		q := t.q[name]
		for i, w := range q {
			if w != c {
				continue
			}
			q = append(q[:i:i], q[i+1:]...)
			if i == 0 && len(q) > 0 {
				close(q[0])
			}
			break
		}
		if len(q) == 0 {
			delete(t.q, name)
		} else {
			t.q[name] = q
		}
	}
}
