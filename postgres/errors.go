package postgres

import (
	"errors"
	"fmt"
)

// Errors of this package. Check them with errors.Is; stale tokens are
// reported as *fence.StaleTokenError (errors.Is(err, fence.ErrStaleToken)),
// tokens out of range with an error matching fence.ErrInvalidToken, and a
// token from an issuer other than the pinned one with an error matching
// fence.ErrIssuerMismatch.
var (
	// ErrNotFound reports that the row a fenced update addresses does not
	// exist. Nothing was written.
	ErrNotFound = errors.New("postgres: row not found")
	// ErrVersionMismatch reports that a versioned update expected another
	// version than the row has. The concrete error is a
	// *VersionMismatchError. Nothing was written.
	ErrVersionMismatch = errors.New("postgres: version mismatch")
)

// VersionMismatchError is the error UpdateVersioned returns when the row's
// version is not the expected one (optimistic concurrency: someone else
// updated the row since the caller read it). It matches ErrVersionMismatch
// with errors.Is. Re-read the row, reapply the change and retry with
// Current as the expected version.
type VersionMismatchError struct {
	// Object names the row, as "table/key".
	Object string
	// Expected is the version the update required.
	Expected int64
	// Current is the row's version when the update was rejected.
	Current int64
}

// Error implements error.
func (e *VersionMismatchError) Error() string {
	return fmt.Sprintf("postgres: version mismatch for %s: expected version %d, the row is at version %d; re-read the row and retry",
		e.Object, e.Expected, e.Current)
}

// Is reports whether target is ErrVersionMismatch.
func (e *VersionMismatchError) Is(target error) bool { return target == ErrVersionMismatch }
