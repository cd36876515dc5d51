package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
)

// DefaultTable is the table Guard keeps its watermarks in unless WithTable
// names another.
const DefaultTable = "fence_watermarks"

// MigrationSQL creates DefaultTable, the watermark table of a Guard, if it
// does not exist. Migrate runs it (for the Guard's table); it is exported
// for users who run their migrations with their own tool.
const MigrationSQL = `CREATE TABLE IF NOT EXISTS fence_watermarks (
	object     text        PRIMARY KEY,
	token      bigint      NOT NULL CHECK (token > 0),
	updated_at timestamptz NOT NULL DEFAULT now()
)`

// migrationTemplate is MigrationSQL with the table name as a parameter.
const migrationTemplate = `CREATE TABLE IF NOT EXISTS %s (
	object     text        PRIMARY KEY,
	token      bigint      NOT NULL CHECK (token > 0),
	updated_at timestamptz NOT NULL DEFAULT now()
)`

// migrateLockKey is the transaction-level advisory lock Migrate takes so
// that concurrent migrations do not race on the catalog ("fencemig").
const migrateLockKey int64 = 0x66656e63656d6967

// DB is what Guard needs of PostgreSQL: a way to begin a transaction.
// *pgxpool.Pool and *pgx.Conn implement it; so does pgx.Tx, in which case
// InTx runs in a savepoint of the caller's transaction and commits only
// when the caller does.
type DB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Guard keeps per-object watermarks in a PostgreSQL table and runs fenced
// transactions: the watermark check, the raise of the watermark and the
// caller's statements commit together or not at all. It is a fence.Guard,
// so httpfence and grpcfence serve it directly. Create it with New; it is
// safe for concurrent use.
type Guard struct {
	db     DB
	table  string // quoted
	name   string // for the migration's advisory lock and errors
	issuer string
}

var _ fence.Guard = (*Guard)(nil)

// An Option configures a Guard.
type Option func(*Guard)

// WithIssuer pins the guard to the issuer (fenced cluster) with id: every
// call is refused with an error matching fence.ErrIssuerMismatch unless its
// context presents the same issuer (guard.ContextWithIssuer). Tokens of two
// clusters are not comparable.
func WithIssuer(id string) Option {
	return func(g *Guard) { g.issuer = id }
}

// WithTable makes the guard keep its watermarks in the table named by the
// identifier parts, e.g. WithTable("app", "watermarks") for
// "app"."watermarks", instead of DefaultTable. The name is quoted.
func WithTable(parts ...string) Option {
	return func(g *Guard) {
		if len(parts) > 0 {
			g.table = pgx.Identifier(parts).Sanitize()
			g.name = strings.Join(parts, ".")
		}
	}
}

// New returns a Guard that keeps its watermarks in db. Run Migrate (or
// MigrationSQL) once before using it.
func New(db DB, opts ...Option) *Guard {
	g := &Guard{db: db, table: quote(DefaultTable), name: DefaultTable}
	for _, o := range opts {
		o(g)
	}
	return g
}

// Migrate creates the guard's watermark table if it does not exist:
//
//	object text PRIMARY KEY, token bigint NOT NULL CHECK (token > 0),
//	updated_at timestamptz NOT NULL DEFAULT now()
//
// It is idempotent and safe to run from several processes at once (it
// takes a transaction-level advisory lock).
func (g *Guard) Migrate(ctx context.Context) error {
	return pgx.BeginFunc(ctx, g.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrateLockKey); err != nil {
			return fmt.Errorf("postgres: migrate %s: %w", g.name, err)
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf(migrationTemplate, g.table)); err != nil {
			return fmt.Errorf("postgres: migrate %s: %w", g.name, err)
		}
		return nil
	})
}

// Do implements fence.Guard: it runs apply in a transaction fenced by
// token t for object:
//
//  1. BEGIN;
//  2. INSERT INTO the watermark table (object, t) ON CONFLICT (object) DO
//     UPDATE SET token = t WHERE token <= t RETURNING token. This either
//     inserts the object's first watermark or locks the object's row and
//     raises its watermark to t; with no row returned, the watermark is
//     above t;
//  3. apply(ctx), the caller's statements, which take the transaction
//     from their context with TxFromContext;
//  4. COMMIT.
//
// A stale token is rejected at step 2 with a *fence.StaleTokenError whose
// Required is the watermark (read back from the row the statement locked)
// and apply is not called. If apply returns an error or panics, the
// transaction is rolled back: the watermark is not raised and none of
// apply's statements persist; Do returns apply's error unchanged. A nil
// apply makes Do a bare check (Check).
//
// apply must make its writes with the transaction of TxFromContext: a
// statement on another connection is neither atomic with the check nor
// rolled back with it. Only what apply writes in PostgreSQL is fenced;
// anything else it does (a call to another service) is not undone when
// the transaction rolls back.
//
// Why this is correct under READ COMMITTED: INSERT ... ON CONFLICT DO
// UPDATE always acts on the latest committed version of the row, waiting
// for a concurrent transaction that holds its lock, and keeps the row
// locked until this transaction ends. So two transactions for one object
// run their check, raise and statements one after the other, each seeing
// the other's committed watermark; the check can never act on a stale
// snapshot. Under REPEATABLE READ or SERIALIZABLE, a concurrent raise
// makes step 2 fail with a serialization error; retry the call.
//
// A zero or out-of-range token is refused with an error matching
// fence.ErrInvalidToken, a mismatched issuer (WithIssuer) with an error
// matching fence.ErrIssuerMismatch and an empty object with one matching
// fence.ErrInvalidArgument, before a transaction is begun (guard.Admit).
// Cancelling ctx aborts the transaction. If COMMIT fails because the
// connection broke, PostgreSQL may or may not have committed; either the
// raise and apply's statements all happened or none did.
func (g *Guard) Do(ctx context.Context, object string, t fence.Token, apply func(ctx context.Context) error) error {
	if err := guard.Admit(ctx, g.issuer, object, t, guard.RequireObject); err != nil {
		return err
	}
	tx, err := g.db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("postgres: begin fenced transaction for %q: %w", object, err)
	}
	defer tx.Rollback(ctx) // no-op after Commit
	if err := g.accept(ctx, tx, object, t); err != nil {
		return err
	}
	if apply != nil {
		if err := apply(guard.WithTx(ctx, tx)); err != nil {
			return err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("postgres: commit fenced transaction for %q: %w", object, err)
	}
	return nil
}

// TxFromContext returns the transaction of the fenced step whose apply was
// given ctx (Guard.Do, and guard.Do or the httpfence and grpcfence
// handlers behind a Guard); ok is false for any other context. The
// transaction commits, with the raise of the watermark, when apply returns
// nil; apply must not commit or roll it back itself.
func TxFromContext(ctx context.Context) (tx pgx.Tx, ok bool) {
	return guard.TxFrom[pgx.Tx](ctx)
}

// InTx runs fn in a transaction fenced by token t for object: it is Do
// with an apply that hands fn the transaction. The check, the raise of the
// watermark and fn's statements commit together or not at all; a stale
// token is rejected before fn is called, and fn's error is returned
// unchanged with everything rolled back. See Do for the statements and why
// they are atomic.
func (g *Guard) InTx(ctx context.Context, object string, t fence.Token, fn func(tx pgx.Tx) error) error {
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
	var mark fence.Token
	err := pgx.BeginFunc(ctx, g.db, func(tx pgx.Tx) error {
		var err error
		mark, err = g.read(ctx, tx, object)
		return err
	})
	return mark, err
}

// accept checks t against object's watermark and raises it, in tx, locking
// the object's row until tx ends.
func (g *Guard) accept(ctx context.Context, tx pgx.Tx, object string, t fence.Token) error {
	q := "INSERT INTO " + g.table + ` AS w (object, token, updated_at) VALUES ($1, $2, now())
ON CONFLICT (object) DO UPDATE SET token = EXCLUDED.token, updated_at = EXCLUDED.updated_at
WHERE w.token <= EXCLUDED.token
RETURNING w.token`
	var got int64
	err := tx.QueryRow(ctx, q, object, int64(t)).Scan(&got)
	if err == nil {
		return nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("postgres: check watermark of %q: %w", object, err)
	}
	// The row exists with a token above t, and the statement locked it:
	// reading it back (a new snapshot under READ COMMITTED) returns exactly
	// the watermark that rejected t.
	mark, err := g.read(ctx, tx, object)
	if err != nil {
		return err
	}
	if mark <= t {
		return fmt.Errorf("postgres: watermark of %q changed concurrently (now %d); try again", object, mark)
	}
	return &fence.StaleTokenError{Object: object, Presented: t, Required: mark}
}

func (g *Guard) read(ctx context.Context, q pgx.Tx, object string) (fence.Token, error) {
	var mark *int64
	err := q.QueryRow(ctx, "SELECT token FROM "+g.table+" WHERE object = $1", object).Scan(&mark)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("postgres: read watermark of %q: %w", object, err)
	}
	return token(mark), nil
}
