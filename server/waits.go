package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// waitKey names a queued request: one session waiting for a grant of one
// kind on one object. The kind keeps primitives apart whose names are
// equal: a semaphore "orders" never wakes a waiter for the lock "orders".
type waitKey struct {
	kind    fence.Kind
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

// waitState is what a waiting call finds in the state: whether its
// session holds the grant (and the grant), is still queued, and who holds
// the object.
type waitState struct {
	granted bool
	grant   fence.Grant
	queued  bool
	holder  uint64
}

// await is the one waiting path of every primitive: it blocks until the
// session of key, queued by a request that was applied, is granted (the
// grant is pushed by Observer.Granted), leaves the queue
// (Observer.WaitEnded), or wait passes or the call ends. look reads the
// state once the waiter is registered, because the grant may have been
// applied before; cancel is the command that takes the waiter out of its
// queue when the wait ends without a grant (if the grant wins that race,
// its result is the grant).
func (s *Server) await(ctx context.Context, key waitKey, wait time.Duration, look func(*fsm.Machine) waitState, cancel *statev1.Command) (fsm.Result, error) {
	ch := s.waits.add(key)
	defer s.waits.remove(key, ch)

	var st waitState
	var alive bool
	s.sm.read(func(m *fsm.Machine) {
		st = look(m)
		_, alive = m.Session(key.session)
	})
	switch {
	case st.granted:
		return fsm.Result{Session: key.session, Granted: true, Grant: st.grant}, nil
	case !alive:
		return fsm.Result{}, fmt.Errorf("%w: session %d ended while it waited for %s %q", fence.ErrSessionNotFound, key.session, key.kind, key.name)
	case !st.queued:
		return fsm.Result{Session: key.session, Holder: st.holder}, nil
	}

	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case out := <-ch:
		if out.granted {
			return fsm.Result{Session: key.session, Granted: true, Grant: out.grant}, nil
		}
		var alive bool
		s.sm.read(func(m *fsm.Machine) { _, alive = m.Session(key.session) })
		if !alive {
			return fsm.Result{}, fmt.Errorf("%w: session %d ended while it waited for %s %q", fence.ErrSessionNotFound, key.session, key.kind, key.name)
		}
		return fsm.Result{Session: key.session}, nil
	case <-timer.C:
	case <-ctx.Done():
	}
	if s.ctx.Err() != nil {
		return fsm.Result{}, errUnavailable
	}
	cctx, stop := context.WithTimeout(s.ctx, cancelWaitTimeout)
	defer stop()
	return s.propose(cctx, cancel)
}
