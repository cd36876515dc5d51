package pggrant

import waitturns "github.com/fenced-dev/fenced/internal/turns"

// turns queues a Grantor's own waiters for each name in arrival order
// (internal/turns): only the head waiter tries the table.
type turns struct{ q waitturns.Queue }

// join queues a waiter for name (turns.Queue.Join).
func (t *turns) join(name string) (<-chan struct{}, func()) { return t.q.Join(name) }
