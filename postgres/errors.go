package postgres

import "errors"

// ErrNotFound reports that the row a fenced update addresses does not
// exist. Nothing was written.
//
// The package's other errors are the root package's, checked with
// errors.Is or errors.As: stale tokens are reported as
// *fence.StaleTokenError (fence.ErrStaleToken), tokens out of range with an
// error matching fence.ErrInvalidToken, a token from an issuer other than
// the pinned one with an error matching fence.ErrIssuerMismatch, and a row
// at another version than UpdateVersioned expected as
// *fence.VersionMismatchError (fence.ErrVersionMismatch).
var ErrNotFound = errors.New("postgres: row not found")
