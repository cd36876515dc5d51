package fsm

import fence "github.com/fenced-dev/fenced"

// ReleaseResult is the outcome of a release.
type ReleaseResult int

// Release outcomes.
const (
	// Released means the session held the lock and released it.
	Released ReleaseResult = iota + 1
	// AlreadyReleased means the lock was not held by anyone, or this
	// (session, seq) had already released it.
	AlreadyReleased
	// NotOwned means another session holds the lock; nothing changed.
	NotOwned
)

// String returns the wire name: released, already_released or not_owned.
func (r ReleaseResult) String() string {
	switch r {
	case Released:
		return "released"
	case AlreadyReleased:
		return "already_released"
	case NotOwned:
		return "not_owned"
	}
	return "unknown"
}

// Result is what applying one command produced. Err is set when the command
// was refused; a refused command changed nothing.
type Result struct {
	// Err is the reason the command was refused, wrapping a fence error.
	Err error
	// Session is the session created (CreateSession, per-grant Acquire) or
	// acted on.
	Session uint64
	// Granted reports an acquire that holds the lock; Grant is the grant.
	Granted bool
	// Grant is set when Granted, and for a Revoke that ended a session
	// (Ended) it is the grant revoked.
	Grant fence.Grant
	// Queued reports an acquire that waits in the lock's queue.
	Queued bool
	// Holder is the session holding the lock when an acquire was not granted.
	Holder uint64
	// Delayed reports an acquire not granted because the lock is in its
	// lock delay (lockdelay.go); Holder is then 0.
	Delayed bool
	// Release is the outcome of a Release command.
	Release ReleaseResult
	// Ended reports that a CloseSession, ExpireSession or Revoke ended a
	// live session.
	Ended bool
	// KV is the outcome of a kv write.
	KV KVResult
	// Permits are the permits a semaphore acquire holds when Granted, by
	// slot; Grant is the first.
	Permits []Permit
	// Available and Capacity are a semaphore's free permits and capacity
	// after an acquire.
	Available, Capacity uint32
	// Queue is the outcome of a work-queue command (queue.go).
	Queue QueueResult
	// Ignored reports a command that was valid but had no effect, such as an
	// expiry proposed in an older term.
	Ignored bool
}
