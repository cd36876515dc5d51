package pggrant

import "sync"

// turns queues a Grantor's own waiters for each name in arrival order:
// only the head waiter tries the table, and when it is granted or gives
// up, the next one becomes the head. Waiters of one process thus take the
// name first come, first served, and a release wakes one query per
// process rather than one per waiter. Between processes there is no
// order: their head waiters race.
type turns struct {
	mu sync.Mutex
	q  map[string][]chan struct{}
}

// join queues a waiter for name. The channel is closed when it is the
// head; leave removes it (and hands the turn on if it was the head).
func (t *turns) join(name string) (<-chan struct{}, func()) {
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
