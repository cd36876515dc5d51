package client

import "errors"

// Errors of the SDK itself. The errors the server reports are translated to
// the errors of package fence (fence.ErrInvalidArgument,
// fence.ErrInvalidToken, fence.ErrSessionNotFound, fence.ErrTokenOverflow,
// fence.ErrLimitExceeded, fence.ErrIssuerMismatch, fence.ErrNotLeader,
// fence.ErrNotOwner, *fence.StaleTokenError, *fence.VersionMismatchError)
// and keep the server's message; check all of them with errors.Is and
// errors.As.
var (
	// ErrClosed reports a call on a Client that was closed, and is the
	// reason its sessions were lost.
	ErrClosed = errors.New("client: closed")
	// ErrSessionClosed reports a session that its holder closed. It is the
	// Err of a session after Close, and the cause of its grants' contexts.
	ErrSessionClosed = errors.New("client: session closed")
	// ErrExpired reports a session or TTL lock whose validity, measured by the
	// client from before the request that granted or last renewed it, ran
	// out without a confirmed renewal. The server may still hold it for a
	// little longer; the SDK no longer trusts it. It comes wrapped together
	// with fence.ErrLockLost.
	ErrExpired = errors.New("client: validity ran out without a confirmed renewal")
	// ErrNotHeld is the cause of a Mutex's or Lease's Context when it holds
	// no grant: before the first Lock, and after Unlock or Release.
	ErrNotHeld = errors.New("client: lock not held")
	// ErrRevoked reports a session an administrator revoked (fenced revoke):
	// the server ended it and every grant it held. It comes wrapped
	// together with fence.ErrLockLost.
	ErrRevoked = errors.New("client: session revoked by an administrator")
	// ErrNotOwned reports an Unlock or Release of a lock that another
	// session holds. Nothing was changed on the server.
	ErrNotOwned = errors.New("client: lock held by another session")
)
