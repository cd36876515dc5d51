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
	// ErrLimitExceeded reports a request refused because it would take a
	// client past one of the server's limits (a per-source quota on
	// sessions, grants or waiters, or the session creation rate). Nothing
	// was changed; the message names the limit and the server flag that
	// sets it. Retry after releasing something, or later.
	ErrLimitExceeded = errors.New("fence: limit exceeded")
	// ErrNotOwner reports a request for a session that did not carry the
	// session's secret (or carried another): only the session's creator,
	// who alone was given the secret, may renew or close the session,
	// release its locks or acquire on its behalf. Nothing was changed.
	ErrNotOwner = errors.New("fence: not the session's owner")
	// ErrPermissionDenied reports a call whose caller's identity has no
	// role granting the permission the call needs on the name it is for
	// (a server started with an auth file). Nothing was changed; the
	// message names the identity, the permission and the name.
	ErrPermissionDenied = errors.New("fence: permission denied")
	// ErrCapacityMismatch reports a semaphore acquire whose capacity is not
	// the semaphore's: the capacity is fixed while any permit of it is live
	// or waited for. Nothing was changed; the message gives both numbers.
	ErrCapacityMismatch = errors.New("fence: capacity mismatch")
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

// ErrVersionMismatch reports a conditional write whose expected version is
// not the object's version. The concrete error is a *VersionMismatchError.
var ErrVersionMismatch = errors.New("fence: version mismatch")

// VersionMismatchError reports a conditional write (optimistic concurrency)
// whose expected version was not the object's current version: someone
// else changed it since the caller read it. Nothing was changed. It matches
// ErrVersionMismatch with errors.Is. Re-read the object, reapply the change
// and retry with Current as the expected version.
type VersionMismatchError struct {
	// Object names what was written: a kv key, or "table/key" for a row.
	Object string
	// Expected is the version the write required (0: must not exist).
	Expected int64
	// Current is the object's version when the write was rejected (0 when
	// it does not exist).
	Current int64
}

// Error implements error.
func (e *VersionMismatchError) Error() string {
	if e.Current == 0 && e.Expected != 0 {
		return fmt.Sprintf("fence: version mismatch for %q: expected version %d, it does not exist (use version 0 to create it)", e.Object, e.Expected)
	}
	return fmt.Sprintf("fence: version mismatch for %q: expected version %d, current version is %d; re-read and retry", e.Object, e.Expected, e.Current)
}

// Is reports whether target is ErrVersionMismatch.
func (e *VersionMismatchError) Is(target error) bool { return target == ErrVersionMismatch }

// ErrScopeMismatch reports a write presented with a token that is not
// authority for what it writes: the token belongs to a grant of another
// scope, or to no grant in force (released, expired, revoked, or never a
// grant's token). Nothing was changed. The concrete error is a
// *ScopeMismatchError.
var ErrScopeMismatch = errors.New("fence: token not issued for this scope")

// ScopeMismatchError is the error the fenced kv returns for a write whose
// token is not held by a grant in force whose scope covers the write
// (ScopeCovers). It is stricter than fencing: a token that would pass the
// watermark, even the newest one, is refused unless it is the token of a
// live grant for the write's scope. It matches ErrScopeMismatch with
// errors.Is.
type ScopeMismatchError struct {
	// Object is what was written (the kv key).
	Object string
	// Required is the scope the write needs a grant for: the key, or the
	// scope the server's key mapping (--kv-scope) gives it.
	Required string
	// Presented is the token the writer sent.
	Presented Token
	// Kind and Scope are the grant the token belongs to; both empty when
	// it belongs to no grant in force.
	Kind  Kind
	Scope string
}

// Error implements error.
func (e *ScopeMismatchError) Error() string {
	if e.Scope == "" {
		return fmt.Sprintf("fence: token %d may not write %q: it belongs to no live grant (released, expired, revoked or never a grant's token); a write needs the token of a grant in force for scope %q",
			e.Presented, e.Object, e.Required)
	}
	if e.Kind == KindRead && ScopeCovers(e.Scope, e.Required) {
		return fmt.Sprintf("fence: token %d may not write %q: it belongs to a read grant of %q, which is authority for reading only; a write needs the token of a write or lock grant in force for scope %q",
			e.Presented, e.Object, e.Scope, e.Required)
	}
	return fmt.Sprintf("fence: token %d may not write %q: it belongs to %s %q, which does not cover scope %q; a write needs the token of a grant in force for scope %q",
		e.Presented, e.Object, e.Kind, e.Scope, e.Required, e.Required)
}

// Is reports whether target is ErrScopeMismatch.
func (e *ScopeMismatchError) Is(target error) bool { return target == ErrScopeMismatch }
