package fsm

import fence "github.com/fenced-dev/fenced"

// waiter is a queued request: the session and the seq of the request that
// queued it, so a grant can be recorded as that request's result
// (replies.promote) and pushed to the call that waits for it
// (Observer.Granted).
type waiter struct {
	session uint64
	seq     uint64
	// kind is the kind of grant the waiter asked for (a read/write lock
	// queues both kinds on one queue).
	kind fence.Kind
}

// waitQueue is the FIFO queue of one object of a primitive: waiters are
// granted in arrival order. A session is queued at most once. The queue
// and the session binding (binding.wait) change together: a primitive
// uses Machine.enqueue, Machine.leaveQueue (which pushes the end of the
// wait) and Machine.promote, not the queue's own methods.
type waitQueue struct {
	list []waiter
}

// has reports whether session is queued.
func (q *waitQueue) has(session uint64) bool {
	for _, w := range q.list {
		if w.session == session {
			return true
		}
	}
	return false
}

// queuedBy reports whether session is queued by the request seq.
func (q *waitQueue) queuedBy(session, seq uint64) bool {
	for _, w := range q.list {
		if w.session == session {
			return w.seq == seq
		}
	}
	return false
}

// push queues w at the end unless its session is queued already.
func (q *waitQueue) push(w waiter) bool {
	if q.has(w.session) {
		return false
	}
	q.list = append(q.list, w)
	return true
}

// remove takes session out of the queue and returns its waiter; false
// when it was not queued.
func (q *waitQueue) remove(session uint64) (waiter, bool) {
	for i, w := range q.list {
		if w.session == session {
			q.list = append(q.list[:i], q.list[i+1:]...)
			return w, true
		}
	}
	return waiter{}, false
}

// pop takes the first waiter out of the queue.
func (q *waitQueue) pop() (waiter, bool) {
	if len(q.list) == 0 {
		return waiter{}, false
	}
	w := q.list[0]
	q.list = q.list[1:]
	return w, true
}

func (q *waitQueue) len() int { return len(q.list) }

// sessions lists the queued sessions in grant order.
func (q *waitQueue) sessions() []uint64 {
	out := make([]uint64, len(q.list))
	for i, w := range q.list {
		out[i] = w.session
	}
	return out
}
