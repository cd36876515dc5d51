package client

import (
	"time"

	fence "github.com/fenced-dev/fenced"
)

// Hooks are functions the Client calls when something an operator should
// see happens, for metrics and alerts (docs/observability.md): the events
// WithLogger logs, as calls. Each field may be nil. The Client calls them
// synchronously from its own goroutines, outside its locks: a hook must
// return quickly and must not call the Client back and wait for it.
type Hooks struct {
	// Jeopardy is called when a session enters jeopardy: a renewal that
	// should have been confirmed by now was not; validFor is how long the
	// session's validity has left.
	Jeopardy func(session uint64, validFor time.Duration)
	// Recovered is called when a session in jeopardy is valid again.
	Recovered func(session uint64)
	// Lost is called once when a session is lost (its validity ran out,
	// the server ended it, or its answer came too late), with the error
	// Session.Err returns. It is not called for a session closed with
	// Close or by Client.Close.
	Lost func(session uint64, err error)
	// Retry is called before a call is tried again after a failure a
	// retry may fix: op names the call ("acquire", "renew", ...),
	// endpoint the member that failed, attempt counts from 1.
	Retry func(op, endpoint string, attempt int, err error)
	// LateGrant is called when a grant arrives after its session's
	// validity ran out: the SDK gives it back and the acquire fails with
	// an error wrapping fence.ErrLockLost; token is the grant's.
	LateGrant func(name string, session uint64, token fence.Token)
}

// WithHooks makes the Client call h's functions (see Hooks).
func WithHooks(h Hooks) Option {
	return func(o *options) { o.hooks = h }
}

func (h *Hooks) jeopardy(session uint64, validFor time.Duration) {
	if h.Jeopardy != nil {
		h.Jeopardy(session, validFor)
	}
}

func (h *Hooks) recovered(session uint64) {
	if h.Recovered != nil {
		h.Recovered(session)
	}
}

func (h *Hooks) lost(session uint64, err error) {
	if h.Lost != nil {
		h.Lost(session, err)
	}
}

func (h *Hooks) retry(op, endpoint string, attempt int, err error) {
	if h.Retry != nil {
		h.Retry(op, endpoint, attempt, err)
	}
}

func (h *Hooks) lateGrant(name string, session uint64, token fence.Token) {
	if h.LateGrant != nil {
		h.LateGrant(name, session, token)
	}
}
