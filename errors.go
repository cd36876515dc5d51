package fence

import (
	"errors"
	"fmt"
)

// Errors returned by the server, the SDK and the guards. Check them with
// errors.Is; the messages wrapped around them say what to do next.
var (
	// ErrInvalidArgument reports a request that failed validation. Nothing
	// was changed.
	ErrInvalidArgument = errors.New("fence: invalid argument")
	// ErrInvalidToken reports a token that is missing, malformed, 0 or above
	// MaxToken.
	ErrInvalidToken = errors.New("fence: invalid token")
	// ErrStaleToken reports a token below the resource's watermark. The
	// concrete error is a *StaleTokenError.
	ErrStaleToken = errors.New("fence: stale token")
	// ErrIssuerMismatch reports a token from another cluster than the one a
	// guard is pinned to.
	ErrIssuerMismatch = errors.New("fence: token from another issuer")
	// ErrSessionNotFound reports a session the server does not know: never
	// created, closed, or expired.
	ErrSessionNotFound = errors.New("fence: session not found")
	// ErrNotGranted reports a lock that was not granted: held by another
	// session and the caller did not wait, or the wait ran out.
	ErrNotGranted = errors.New("fence: not granted")
	// ErrLockLost reports a grant that can no longer be trusted: its session
	// was lost or its validity ran out before it could be confirmed.
	ErrLockLost = errors.New("fence: lock lost")
	// ErrTokenOverflow reports a token counter that reached MaxToken. The
	// cluster issues no further grants.
	ErrTokenOverflow = errors.New("fence: token counter exhausted")
	// ErrNotLeader reports a server that cannot serve a write because it is
	// not the leader and could not forward it.
	ErrNotLeader = errors.New("fence: not the leader")
)

// StaleTokenError is the error a guard returns when a presented token is
// below the object's watermark. It matches ErrStaleToken with errors.Is.
type StaleTokenError struct {
	// Object is the protected object (resource id) the write was for.
	Object string
	// Presented is the token the writer sent.
	Presented Token
	// Required is the lowest token the object accepts now (its watermark).
	Required Token
}

// Error implements error.
func (e *StaleTokenError) Error() string {
	return fmt.Sprintf("fence: stale token %d for %q: the object has accepted token %d; a write needs a token of at least %d",
		e.Presented, e.Object, e.Required, e.Required)
}

// Is reports whether target is ErrStaleToken.
func (e *StaleTokenError) Is(target error) bool { return target == ErrStaleToken }
