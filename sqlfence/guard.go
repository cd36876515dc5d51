package sqlfence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
)

// Guard keeps per-object watermarks in a table (fence_watermarks) of a
// database/sql database and runs fenced transactions: the watermark check,
// the raise of the watermark and the caller's statements commit together or
// not at all. It is a fence.Guard, so the httpfence middleware and the
// grpcfence interceptors take it directly. Create it with New; it is safe
// for concurrent use.
type Guard struct {
	db      *sql.DB
	dialect Dialect
	sql     statements
	issuer  string
}

var _ fence.Guard = (*Guard)(nil)

// An Option configures a Guard.
type Option func(*Guard)

// WithDialect sets the SQL dialect instead of detecting it from the driver.
func WithDialect(d Dialect) Option {
	return func(g *Guard) { g.dialect = d }
}

// WithIssuer pins the guard to the issuer (fenced cluster) with id: every
// call is refused with an error matching fence.ErrIssuerMismatch unless its
// context presents the same issuer (guard.ContextWithIssuer).
func WithIssuer(id string) Option {
	return func(g *Guard) { g.issuer = id }
}

// New returns a Guard that keeps its watermarks in db. The dialect is the
// one given with WithDialect or else detected (Detect); an unknown dialect
// is an error matching fence.ErrInvalidArgument. Run Migrate (or the
// dialect's migration SQL) once before using the guard.
//
// For SQLite, open db with a busy timeout (modernc.org/sqlite:
// "file:app.db?_pragma=busy_timeout(10000)"; go-sqlite3: "_busy_timeout"),
// so that a transaction waits for the writer before it instead of failing
// at once with SQLITE_BUSY; WAL mode is recommended.
func New(db *sql.DB, opts ...Option) (*Guard, error) {
	g := &Guard{db: db}
	for _, o := range opts {
		o(g)
	}
	if g.dialect == 0 {
		d, err := Detect(db)
		if err != nil {
			return nil, err
		}
		g.dialect = d
	}
	s, ok := dialects[g.dialect]
	if !ok {
		return nil, fmt.Errorf("%w: sqlfence: unknown dialect %v", fence.ErrInvalidArgument, g.dialect)
	}
	g.sql = s
	return g, nil
}

// Dialect returns the SQL dialect the guard speaks.
func (g *Guard) Dialect() Dialect { return g.dialect }

// Migrate creates the watermark table if it does not exist
// (PostgresMigrationSQL or SQLiteMigrationSQL). It is idempotent and safe
// to run from several processes at once.
func (g *Guard) Migrate(ctx context.Context) error {
	tx, err := g.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlfence: migrate: %w", err)
	}
	defer tx.Rollback()
	if g.sql.lock != "" {
		if _, err := tx.ExecContext(ctx, g.sql.lock); err != nil {
			return fmt.Errorf("sqlfence: migrate: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, g.sql.migrate); err != nil {
		return fmt.Errorf("sqlfence: migrate: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlfence: migrate: %w", err)
	}
	return nil
}

// Do implements fence.Guard: it runs apply in a transaction fenced by
// token t for object:
//
//  1. BEGIN;
//  2. INSERT INTO fence_watermarks (object, token) VALUES (object, t)
//     ON CONFLICT (object) DO UPDATE SET token = t WHERE token <= t
//     RETURNING token. It inserts the object's first watermark or raises
//     the existing one; with no row returned, the watermark is above t;
//  3. apply(ctx), the caller's statements, which take the transaction
//     from their context with TxFromContext;
//  4. COMMIT.
//
// A stale token is rejected at step 2 with a *fence.StaleTokenError whose
// Required is the watermark, and apply is not called. If apply returns an
// error or panics, the transaction is rolled back: the watermark is not
// raised and none of apply's statements persist; Do returns apply's error
// unchanged. A nil apply makes Do a bare check (Check). apply must make
// its writes with the transaction of TxFromContext: a statement on another
// connection is neither atomic with the check nor rolled back with it (on
// SQLite it would wait for this transaction's write lock until the busy
// timeout).
//
// Why this is atomic:
//
//   - PostgreSQL, READ COMMITTED: the upsert acts on the latest committed
//     version of the object's row, waiting for a transaction that holds its
//     lock, and keeps it locked until this transaction ends; transactions
//     of one object are serialised and never check a stale snapshot.
//   - SQLite: the upsert is the transaction's first statement, so the
//     transaction takes the database's write lock before it reads anything
//     (the same effect as BEGIN IMMEDIATE, and waiting with the busy
//     timeout if another writer holds it) and keeps it until it ends.
//     SQLite allows one writer at a time, so no other transaction can
//     change a watermark between the check and the commit, and this one
//     never reads a snapshot older than the latest commit.
//
// A zero or out-of-range token is refused with an error matching
// fence.ErrInvalidToken, a mismatched issuer (WithIssuer) with one
// matching fence.ErrIssuerMismatch and an empty object with one matching
// fence.ErrInvalidArgument, before a transaction is begun (guard.Admit).
// Cancelling ctx rolls the transaction back. If COMMIT fails because the
// connection broke, the database may or may not have committed; either the
// raise and apply's statements all happened or none did.
func (g *Guard) Do(ctx context.Context, object string, t fence.Token, apply func(ctx context.Context) error) error {
	if err := guard.Admit(ctx, g.issuer, object, t, guard.RequireObject); err != nil {
		return err
	}
	tx, err := g.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlfence: begin fenced transaction for %q: %w", object, err)
	}
	defer tx.Rollback() // no-op after Commit
	if err := g.accept(ctx, tx, object, t); err != nil {
		return err
	}
	if apply != nil {
		if err := apply(guard.WithTx(ctx, tx)); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlfence: commit fenced transaction for %q: %w", object, err)
	}
	return nil
}

// TxFromContext returns the transaction of the fenced step whose apply was
// given ctx (Guard.Do, and guard.Do or the httpfence and grpcfence
// handlers behind a Guard); ok is false for any other context. The
// transaction commits, with the raise of the watermark, when apply returns
// nil; apply must not commit or roll it back itself.
func TxFromContext(ctx context.Context) (tx *sql.Tx, ok bool) {
	return guard.TxFrom[*sql.Tx](ctx)
}

// InTx runs fn in a transaction fenced by token t for object: it is Do
// with an apply that hands fn the transaction. The check, the raise of the
// watermark and fn's statements commit together or not at all; a stale
// token is rejected before fn is called, and fn's error is returned
// unchanged with everything rolled back. See Do for the statements and why
// they are atomic.
func (g *Guard) InTx(ctx context.Context, object string, t fence.Token, fn func(tx *sql.Tx) error) error {
	return g.Do(ctx, object, t, guard.TxFunc(fn))
}

// Check applies the watermark rule to object and, when t is accepted,
// raises the watermark, in a transaction of its own: Do without an apply.
// Use Do or InTx to make a write part of the same transaction.
func (g *Guard) Check(ctx context.Context, object string, t fence.Token) error {
	return g.Do(ctx, object, t, nil)
}

// Watermark returns the highest token accepted for object, or 0 if none.
func (g *Guard) Watermark(ctx context.Context, object string) (fence.Token, error) {
	return g.read(ctx, g.db, object)
}

// accept checks t against object's watermark and raises it, in tx.
func (g *Guard) accept(ctx context.Context, tx *sql.Tx, object string, t fence.Token) error {
	var got int64
	err := tx.QueryRowContext(ctx, g.sql.accept, object, int64(t)).Scan(&got)
	if err == nil {
		return nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("sqlfence: check watermark of %q: %w", object, err)
	}
	// The watermark is above t. This transaction holds the row's lock
	// (PostgreSQL) or the database's write lock (SQLite), so reading it
	// back returns exactly the watermark that rejected t.
	mark, err := g.read(ctx, tx, object)
	if err != nil {
		return err
	}
	if mark <= t {
		return fmt.Errorf("sqlfence: watermark of %q changed concurrently (now %d); try again", object, mark)
	}
	return &fence.StaleTokenError{Object: object, Presented: t, Required: mark}
}

// queryer is *sql.DB or *sql.Tx.
type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (g *Guard) read(ctx context.Context, q queryer, object string) (fence.Token, error) {
	var mark sql.NullInt64
	err := q.QueryRowContext(ctx, g.sql.read, object).Scan(&mark)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sqlfence: read watermark of %q: %w", object, err)
	}
	if !mark.Valid || mark.Int64 < 1 {
		return 0, nil
	}
	return fence.Token(mark.Int64), nil
}
