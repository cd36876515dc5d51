package postgres

import (
	"context"

	fence "github.com/fenced-dev/fenced"
)

// DefaultVersionColumn is the column that holds a row's version when
// VersionedUpdate.VersionColumn is empty.
const DefaultVersionColumn = "version"

// VersionedUpdate is a FencedUpdate that also requires the row to be at an
// expected version (optimistic concurrency) and increments the version.
// Fencing and the version guard compose (docs/design.md §5): both conditions are
// in the one statement.
type VersionedUpdate struct {
	FencedUpdate
	// VersionColumn is the bigint (or integer) NOT NULL column that holds
	// the row's version; DefaultVersionColumn when empty.
	VersionColumn string
	// Expected is the version the caller read; the update applies only if
	// the row is still at it.
	Expected int64
}

// versionGuard is the version condition of an update.
type versionGuard struct {
	column   string
	expected int64
}

// UpdateVersioned writes one row under fencing token t if its token allows
// t and its version is u.Expected, in a single statement:
//
//	UPDATE table SET <Set>, <SetSQL>, token_column = t, version = version + 1
//	WHERE key_column = Key AND (token_column IS NULL OR token_column <= t)
//	  AND version = Expected
//	RETURNING version
//
// and returns the row's new version. When no row matched, it reads the row
// back and reports, in this order of precedence:
//   - no row: an error matching ErrNotFound;
//   - the row's token is above t: a *fence.StaleTokenError (the writer lost
//     its grant; its view of the version does not matter);
//   - the row's version is not Expected: a *fence.VersionMismatchError
//     with the current version;
//   - otherwise the row changed after the statement's snapshot and the
//     statement is run again, a bounded number of times.
//
// Invalid tokens and issuers are refused as in Update. In every error case
// nothing was written.
func UpdateVersioned(ctx context.Context, db Querier, u VersionedUpdate, t fence.Token) (version int64, err error) {
	col := u.VersionColumn
	if col == "" {
		col = DefaultVersionColumn
	}
	return update(ctx, db, u.FencedUpdate, &versionGuard{column: col, expected: u.Expected}, t)
}
