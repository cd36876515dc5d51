package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
)

// DefaultTokenColumn is the column that holds a row's fencing token when
// FencedUpdate.TokenColumn is empty.
const DefaultTokenColumn = "fencing_token"

// maxAttempts bounds how often a single-statement write is retried after it
// matched no row although the row accepts the token when read back: that
// happens only when the row was inserted, or its token lowered, after the
// statement's snapshot was taken, and a new statement sees it.
const maxAttempts = 5

// Querier is what the single-statement functions need of a connection:
// *pgx.Conn, *pgxpool.Pool and pgx.Tx implement it. Passing a pgx.Tx runs
// the update inside the caller's transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// FencedUpdate describes a write to one row that carries its own fencing
// token in a column (DefaultTokenColumn unless TokenColumn says otherwise):
// the row is the fenced object and the column is its watermark. NULL in the
// token column means the row has no watermark yet.
//
// Identifiers (Schema, Table, KeyColumn, TokenColumn and the keys of Set)
// are always quoted, so they cannot inject SQL; they are also case
// sensitive, as quoted identifiers are in PostgreSQL. Values (Key, the
// values of Set, SetArgs) are always sent as parameters. SetSQL is the one
// piece of raw SQL: write it in code, never build it from input.
type FencedUpdate struct {
	// Schema optionally qualifies Table.
	Schema string
	// Table is the table the row is in. Required.
	Table string
	// KeyColumn is the column that identifies the row. It must be unique
	// (a primary key or unique constraint); Upsert requires a unique index
	// on it. Required.
	KeyColumn string
	// Key is the value of KeyColumn of the row to write.
	Key any
	// TokenColumn is the bigint column that holds the row's fencing token;
	// DefaultTokenColumn when empty.
	TokenColumn string
	// Set maps columns to their new values. Column names are quoted, values
	// are sent as parameters. It must not name the token column (it is set
	// to the presented token) nor, for UpdateVersioned, the version column.
	Set map[string]any
	// SetSQL optionally adds raw assignments to the SET list, for values
	// computed from the row, e.g. `"balance" = "balance" + $1`. Its
	// placeholders $1..$n refer to SetArgs. Upsert does not support it.
	SetSQL string
	// SetArgs are the arguments of SetSQL's placeholders, in order.
	SetArgs []any
	// Issuer, when not empty, pins the guard to the issuer (cluster) of
	// that id: the write is refused with an error matching
	// fence.ErrIssuerMismatch unless the context presents the same issuer
	// (guard.ContextWithIssuer).
	Issuer string
}

// Update writes one row under fencing token t in a single statement:
//
//	UPDATE table SET <Set>, <SetSQL>, token_column = t
//	WHERE key_column = Key AND (token_column IS NULL OR token_column <= t)
//
// The comparison and the write are one statement, so they are atomic: under
// READ COMMITTED a concurrent writer's update of the row makes this one wait
// for it and re-evaluate the WHERE clause against the committed row, so a
// lower token can never overwrite a higher one.
//
// When no row matched, Update finds out why by reading the row back:
//   - no row: an error matching ErrNotFound;
//   - the row's token is above t: a *fence.StaleTokenError whose Required
//     is the token read back (the object is named "table/key");
//   - the row accepts t now (it was inserted or changed after the
//     statement started): the statement is run again, a bounded number of
//     times.
//
// A zero or out-of-range token is refused with an error matching
// fence.ErrInvalidToken, and a mismatched issuer with one matching
// fence.ErrIssuerMismatch, before anything is sent. In every error case
// nothing was written.
func Update(ctx context.Context, db Querier, u FencedUpdate, t fence.Token) error {
	_, err := update(ctx, db, u, nil, t)
	return err
}

// Upsert inserts the row with Key, the values of Set and token t, or, when
// a row with Key exists, updates it, in a single statement, if the row's
// token is NULL or at most t:
//
//	INSERT INTO table (key_column, <Set columns>, token_column) VALUES (...)
//	ON CONFLICT (key_column) DO UPDATE SET <Set columns> = EXCLUDED..., token_column = t
//	WHERE table.token_column IS NULL OR table.token_column <= t
//
// INSERT ... ON CONFLICT DO UPDATE locks the conflicting row and evaluates
// the WHERE clause against its latest committed version, so check and write
// are atomic under READ COMMITTED. KeyColumn needs a unique index. SetSQL is
// not supported. A stale token is reported as a *fence.StaleTokenError with
// the token read back; invalid tokens and issuers as in Update.
func Upsert(ctx context.Context, db Querier, u FencedUpdate, t fence.Token) error {
	if err := guard.Admit(ctx, u.Issuer, u.object(), t, nil); err != nil {
		return err
	}
	if err := u.validate("", true); err != nil {
		return err
	}
	if u.SetSQL != "" || len(u.SetArgs) > 0 {
		return fmt.Errorf("%w: postgres: Upsert does not support SetSQL; use Set", fence.ErrInvalidArgument)
	}
	tbl, key, tok := u.table(), quote(u.KeyColumn), quote(u.tokenColumn())
	cols := u.setColumns()
	args := []any{u.Key}
	names := []string{key}
	values := []string{"$1"}
	for _, c := range cols {
		args = append(args, u.Set[c])
		names = append(names, quote(c))
		values = append(values, "$"+strconv.Itoa(len(args)))
	}
	args = append(args, int64(t))
	names = append(names, tok)
	values = append(values, "$"+strconv.Itoa(len(args)))
	var set []string
	for _, n := range names[1:] {
		set = append(set, n+" = EXCLUDED."+n)
	}
	q := "INSERT INTO " + tbl + ` AS "fence_current" (` + strings.Join(names, ", ") + ") VALUES (" + strings.Join(values, ", ") + ")" +
		" ON CONFLICT (" + key + ") DO UPDATE SET " + strings.Join(set, ", ") +
		` WHERE "fence_current".` + tok + " IS NULL OR " + `"fence_current".` + tok + " <= EXCLUDED." + tok
	for range maxAttempts {
		tag, err := db.Exec(ctx, q, args...)
		if err != nil {
			return fmt.Errorf("postgres: upsert %s: %w", u.object(), err)
		}
		if tag.RowsAffected() > 0 {
			return nil
		}
		// The row exists and its token was above t when the statement
		// locked it. Read the token back for the error.
		var mark *int64
		err = db.QueryRow(ctx, u.readSQL(""), u.Key).Scan(&mark)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // deleted since: try again
		}
		if err != nil {
			return fmt.Errorf("postgres: upsert %s: read back token: %w", u.object(), err)
		}
		if m := token(mark); m > t {
			return &fence.StaleTokenError{Object: u.object(), Presented: t, Required: m}
		}
	}
	return fmt.Errorf("postgres: upsert %s: the row changed concurrently %d times; try again", u.object(), maxAttempts)
}

// update runs Update or, with a non-empty versionColumn, UpdateVersioned.
func update(ctx context.Context, db Querier, u FencedUpdate, v *versionGuard, t fence.Token) (int64, error) {
	if err := guard.Admit(ctx, u.Issuer, u.object(), t, nil); err != nil {
		return 0, err
	}
	versionColumn := ""
	if v != nil {
		versionColumn = v.column
	}
	if err := u.validate(versionColumn, true); err != nil {
		return 0, err
	}

	args := slices.Clone(u.SetArgs)
	arg := func(x any) string {
		args = append(args, x)
		return "$" + strconv.Itoa(len(args))
	}
	tok := quote(u.tokenColumn())
	var set []string
	for _, c := range u.setColumns() {
		set = append(set, quote(c)+" = "+arg(u.Set[c]))
	}
	if u.SetSQL != "" {
		set = append(set, u.SetSQL)
	}
	tp := arg(int64(t))
	set = append(set, tok+" = "+tp)
	where := quote(u.KeyColumn) + " = " + arg(u.Key) + " AND (" + tok + " IS NULL OR " + tok + " <= " + tp + ")"
	ver := ""
	if v != nil {
		ver = quote(v.column)
		set = append(set, ver+" = "+ver+" + 1")
		where += " AND " + ver + " = " + arg(v.expected)
	}
	q := "UPDATE " + u.table() + " SET " + strings.Join(set, ", ") + " WHERE " + where
	if v != nil {
		q += " RETURNING " + ver
	}

	for range maxAttempts {
		if v == nil {
			tag, err := db.Exec(ctx, q, args...)
			if err != nil {
				return 0, fmt.Errorf("postgres: update %s: %w", u.object(), err)
			}
			if tag.RowsAffected() > 0 {
				return 0, nil
			}
		} else {
			var next int64
			err := db.QueryRow(ctx, q, args...).Scan(&next)
			if err == nil {
				return next, nil
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return 0, fmt.Errorf("postgres: update %s: %w", u.object(), err)
			}
		}

		// No row matched. Read the row back to find out why. Under READ
		// COMMITTED this is a new snapshot, at least as new as the one
		// the update saw: a token read back above t means the object is
		// stale now (tokens of a row only grow); a row that accepts t now
		// appeared or changed after the update's snapshot, so the update
		// is tried again. Under REPEATABLE READ both statements share one
		// snapshot and agree.
		var mark, current *int64
		dest := []any{&mark}
		if v != nil {
			dest = append(dest, &current)
		}
		err := db.QueryRow(ctx, u.readSQL(ver), u.Key).Scan(dest...)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, fmt.Errorf("%w: %s has no row with %s = %v", ErrNotFound, u.table(), quote(u.KeyColumn), u.Key)
		}
		if err != nil {
			return 0, fmt.Errorf("postgres: update %s: read back token: %w", u.object(), err)
		}
		if m := token(mark); m > t {
			return 0, &fence.StaleTokenError{Object: u.object(), Presented: t, Required: m}
		}
		if v != nil && (current == nil || *current != v.expected) {
			var cur int64
			if current != nil {
				cur = *current
			}
			return 0, &fence.VersionMismatchError{Object: u.object(), Expected: v.expected, Current: cur}
		}
	}
	return 0, fmt.Errorf("postgres: update %s: the row changed concurrently %d times; try again", u.object(), maxAttempts)
}

// validate checks the identifiers and the Set list.
func (u *FencedUpdate) validate(versionColumn string, allowEmptySet bool) error {
	switch {
	case u.Table == "":
		return fmt.Errorf("%w: postgres: FencedUpdate.Table is empty", fence.ErrInvalidArgument)
	case u.KeyColumn == "":
		return fmt.Errorf("%w: postgres: FencedUpdate.KeyColumn is empty", fence.ErrInvalidArgument)
	case !allowEmptySet && len(u.Set) == 0:
		return fmt.Errorf("%w: postgres: FencedUpdate.Set is empty; name the columns to write", fence.ErrInvalidArgument)
	}
	tok := u.tokenColumn()
	if tok == versionColumn {
		return fmt.Errorf("%w: postgres: the token column and the version column are both %q", fence.ErrInvalidArgument, tok)
	}
	for c := range u.Set {
		switch c {
		case "":
			return fmt.Errorf("%w: postgres: FencedUpdate.Set has an empty column name", fence.ErrInvalidArgument)
		case tok:
			return fmt.Errorf("%w: postgres: FencedUpdate.Set names the token column %q; it is set to the presented token", fence.ErrInvalidArgument, c)
		case versionColumn:
			return fmt.Errorf("%w: postgres: FencedUpdate.Set names the version column %q; it is incremented by the update", fence.ErrInvalidArgument, c)
		}
	}
	return nil
}

func (u *FencedUpdate) tokenColumn() string {
	if u.TokenColumn == "" {
		return DefaultTokenColumn
	}
	return u.TokenColumn
}

// table returns the quoted, optionally schema-qualified table name.
func (u *FencedUpdate) table() string {
	if u.Schema != "" {
		return pgx.Identifier{u.Schema, u.Table}.Sanitize()
	}
	return quote(u.Table)
}

// object names the row in errors: "table/key".
func (u *FencedUpdate) object() string {
	return fmt.Sprintf("%s/%v", u.Table, u.Key)
}

// setColumns returns the columns of Set in a stable order, so that equal
// updates produce equal SQL (and share pgx's statement cache).
func (u *FencedUpdate) setColumns() []string {
	cols := make([]string, 0, len(u.Set))
	for c := range u.Set {
		cols = append(cols, c)
	}
	slices.Sort(cols)
	return cols
}

// readSQL reads the row's token and, with a quoted version column, its
// version.
func (u *FencedUpdate) readSQL(quotedVersion string) string {
	cols := quote(u.tokenColumn())
	if quotedVersion != "" {
		cols += ", " + quotedVersion
	}
	return "SELECT " + cols + " FROM " + u.table() + " WHERE " + quote(u.KeyColumn) + " = $1"
}

// quote quotes one identifier.
func quote(name string) string { return pgx.Identifier{name}.Sanitize() }

// token converts a stored token; NULL and values below 1 mean no watermark.
func token(v *int64) fence.Token {
	if v == nil || *v < 1 {
		return 0
	}
	return fence.Token(*v)
}
