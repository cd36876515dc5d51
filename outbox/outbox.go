package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
)

// Table names, as MigrationSQL creates them.
const (
	// Table holds the commands, one row each.
	Table = "fence_outbox"
	// WatermarkTable holds a watermark per resource, shared by Guard and
	// the Dispatcher. It has the layout of postgres.MigrationSQL.
	WatermarkTable = "fence_outbox_watermarks"
)

// MigrationSQL creates the outbox's tables if they do not exist. Migrate
// runs it; it is exported for users who run migrations with their own tool.
//
// A command's state is pending until the dispatcher delivers it
// (delivered), drops it because its token is below the resource's
// watermark or its issuer is not the pinned one (dropped, with the reason),
// or gives up on it after a Permanent error (failed, with the reason).
// attempts counts the delivery attempts begun, including one interrupted by
// a crash; last_error is the latest delivery error.
const MigrationSQL = `CREATE TABLE IF NOT EXISTS fence_outbox (
	id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	resource     text        NOT NULL,
	token        bigint      NOT NULL CHECK (token > 0),
	issuer       text        NOT NULL DEFAULT '',
	payload      bytea       NOT NULL,
	state        text        NOT NULL DEFAULT 'pending'
	                         CHECK (state IN ('pending', 'delivered', 'dropped', 'failed')),
	attempts     integer     NOT NULL DEFAULT 0,
	last_error   text,
	reason       text,
	created_at   timestamptz NOT NULL DEFAULT now(),
	attempted_at timestamptz,
	done_at      timestamptz
);
CREATE INDEX IF NOT EXISTS fence_outbox_pending ON fence_outbox (id) WHERE state = 'pending';
CREATE TABLE IF NOT EXISTS fence_outbox_watermarks (
	object     text        PRIMARY KEY,
	token      bigint      NOT NULL CHECK (token > 0),
	updated_at timestamptz NOT NULL DEFAULT now()
)`

// AdvisoryLockKey is the session-level PostgreSQL advisory lock
// (pg_advisory_lock(bigint)) a dispatcher holds while it runs, so that
// only one runs per database. It shows in pg_locks as locktype advisory
// with classid 1717923427 (its high 32 bits), objid 1701803380 (its low 32
// bits) and objsubid 1.
const AdvisoryLockKey int64 = 0x66656e63656f7574 // "fenceout"

// enqueueLockSpace is the first key of the transaction-level advisory lock
// Enqueue takes per resource (pg_advisory_xact_lock(int, int)); the two-int
// key space does not overlap AdvisoryLockKey's.
const enqueueLockSpace int32 = 0x66656e63 // "fenc"

// migrateLockKey serialises concurrent migrations ("fenceoum").
const migrateLockKey int64 = 0x66656e63656f756d

// Migrate creates the outbox's tables (MigrationSQL) if they do not exist.
// It is idempotent and safe to run from several processes at once.
func Migrate(ctx context.Context, db DB) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrateLockKey); err != nil {
			return errorf("migrate: %w", err)
		}
		if _, err := tx.Exec(ctx, MigrationSQL); err != nil {
			return errorf("migrate: %w", err)
		}
		return nil
	})
}

// Command is a side effect to deliver through the outbox.
type Command struct {
	// Resource names the target of the side effect, the object whose
	// watermark orders commands (for example "customer-7/welcome-email").
	// Required.
	Resource string
	// Token is the fencing token the worker holds. Required.
	Token fence.Token
	// Payload is what the dispatcher hands to Deliver.
	Payload []byte
}

// Enqueue adds cmd to the outbox in tx, the transaction that makes the
// worker's state change, so that the command exists if and only if that
// change commits. Put both under the worker's fence, for example inside
// postgres.Guard.InTx, so that a stale worker enqueues nothing. Enqueue
// returns the command's id; ids order delivery.
//
// The issuer presented in ctx (guard.ContextWithIssuer), if any, is
// recorded with the command for a Dispatcher pinned to an issuer.
//
// Enqueue takes a transaction-level advisory lock on the resource, held
// until tx ends: the transactions that enqueue for one resource commit one
// at a time, so their ids are in commit order and the dispatcher never
// sees a resource's later command before an earlier one. A token of 0 or
// above fence.MaxToken is refused with an error matching
// fence.ErrInvalidToken, an empty resource with one matching
// fence.ErrInvalidArgument.
func Enqueue(ctx context.Context, tx pgx.Tx, cmd Command) (id int64, err error) {
	if err := guard.Admit(ctx, "", cmd.Resource, cmd.Token, guard.RequireObject); err != nil {
		return 0, err
	}
	payload := cmd.Payload
	if payload == nil {
		payload = []byte{}
	}
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, hashtext($2))", enqueueLockSpace, cmd.Resource); err != nil {
		return 0, errorf("enqueue for %q: %w", cmd.Resource, err)
	}
	err = tx.QueryRow(ctx, "INSERT INTO "+Table+" (resource, token, issuer, payload) VALUES ($1, $2, $3, $4) RETURNING id",
		cmd.Resource, int64(cmd.Token), guard.IssuerFromContext(ctx), payload).Scan(&id)
	if err != nil {
		return 0, errorf("enqueue for %q: %w", cmd.Resource, err)
	}
	return id, nil
}

// State is the state of an outbox entry.
type State string

// The states of an outbox entry.
const (
	// StatePending: not delivered yet (possibly attempted).
	StatePending State = "pending"
	// StateDelivered: Deliver returned nil.
	StateDelivered State = "delivered"
	// StateDropped: not delivered because its token was below the
	// resource's watermark or its issuer was not the pinned one.
	StateDropped State = "dropped"
	// StateFailed: Deliver returned a Permanent error.
	StateFailed State = "failed"
)

// Entry is a command as the outbox records it.
type Entry struct {
	// ID is the command's id; ids order delivery.
	ID int64
	// Resource is the command's resource.
	Resource string
	// Token is the token the command was enqueued with.
	Token fence.Token
	// Issuer is the issuer presented when the command was enqueued, or "".
	Issuer string
	// Payload is the command's payload.
	Payload []byte
	// State is where the command is: pending, delivered, dropped or failed.
	State State
	// Attempts counts the delivery attempts begun.
	Attempts int
	// LastError is the latest delivery error, or "".
	LastError string
	// Reason says why the command was dropped or failed, or "".
	Reason string
	// CreatedAt is when the command was enqueued (its transaction's start).
	CreatedAt time.Time
	// DoneAt is when it was delivered, dropped or failed; zero if pending.
	DoneAt time.Time
}

// Querier runs a query returning one row: *pgxpool.Pool, *pgx.Conn and
// pgx.Tx implement it.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Lookup returns the outbox entry with id, or an error matching
// ErrNotFound.
func Lookup(ctx context.Context, q Querier, id int64) (Entry, error) {
	var e Entry
	var tok int64
	var state string
	var lastErr, reason *string
	var doneAt *time.Time
	err := q.QueryRow(ctx, `SELECT id, resource, token, issuer, payload, state, attempts, last_error, reason, created_at, done_at
FROM `+Table+` WHERE id = $1`, id).Scan(&e.ID, &e.Resource, &tok, &e.Issuer, &e.Payload, &state, &e.Attempts, &lastErr, &reason, &e.CreatedAt, &doneAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Entry{}, fmt.Errorf("%w: no entry with id %d", ErrNotFound, id)
	}
	if err != nil {
		return Entry{}, errorf("lookup %d: %w", id, err)
	}
	e.Token, e.State = fence.Token(tok), State(state)
	if lastErr != nil {
		e.LastError = *lastErr
	}
	if reason != nil {
		e.Reason = *reason
	}
	if doneAt != nil {
		e.DoneAt = *doneAt
	}
	return e, nil
}
