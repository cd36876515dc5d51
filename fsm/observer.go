package fsm

import fence "github.com/fenced-dev/fenced"

// EndReason says why a session ended.
type EndReason int

// Reasons a session ends.
const (
	// Closed means the session's owner closed it.
	Closed EndReason = iota + 1
	// Expired means the leader expired it after its TTL ran out.
	Expired
	// OneShotUnused means a per-grant session whose try-acquire failed was
	// removed in the same command.
	OneShotUnused
	// Unlocked means the holder released the grant (Released events only).
	Unlocked
	// Revoked means an administrator revoked the session (a force-revoke
	// of a lock it held).
	Revoked
)

// String names the reason.
func (r EndReason) String() string {
	switch r {
	case Closed:
		return "closed"
	case Expired:
		return "expired"
	case OneShotUnused:
		return "unused"
	case Unlocked:
		return "released"
	case Revoked:
		return "revoked"
	}
	return "unknown"
}

// Observer learns about state changes as they are applied, for waking
// waiting calls, metrics and logs. Its methods run inside Apply, on the
// applying goroutine: they must not block or call back into the Machine.
// They are called on every replica, including while the log is replayed at
// start-up.
type Observer interface {
	// Granted is called for every grant of every primitive: immediate ones
	// and waiters promoted when a holder released or expired. g.Kind and
	// g.Scope say what was granted.
	Granted(g fence.Grant)
	// Released is called when a grant of kind k on object name ends: its
	// holder released it, its session ended or it was revoked. issuedAt
	// is the grant's time (Unix ms, fence.Grant.IssuedAt).
	Released(k fence.Kind, name string, session uint64, token fence.Token, issuedAt int64, reason EndReason)
	// WaitEnded is called when a waiter for a grant of kind k on object
	// name leaves a queue without a grant: its session ended or its wait
	// was cancelled. The kind keeps waits on equal names of two primitives
	// apart (a semaphore "orders" and a lock "orders").
	WaitEnded(k fence.Kind, name string, session uint64)
	// SessionStarted is called when a session is created.
	SessionStarted(session uint64, ttlMs int64)
	// SessionEnded is called when a session ends.
	SessionEnded(session uint64, reason EndReason)
}

// NopObserver ignores every event. Embed it to implement only some methods.
type NopObserver struct{}

// Granted implements Observer.
func (NopObserver) Granted(fence.Grant) {}

// Released implements Observer.
func (NopObserver) Released(fence.Kind, string, uint64, fence.Token, int64, EndReason) {}

// WaitEnded implements Observer.
func (NopObserver) WaitEnded(fence.Kind, string, uint64) {}

// SessionStarted implements Observer.
func (NopObserver) SessionStarted(uint64, int64) {}

// SessionEnded implements Observer.
func (NopObserver) SessionEnded(uint64, EndReason) {}
