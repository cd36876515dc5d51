package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/postgres"
)

// Defaults of the Dispatcher's zero fields.
const (
	// DefaultPollInterval is the wait between looks for new commands.
	DefaultPollInterval = time.Second
	// DefaultMinBackoff is the wait after a command's first failed attempt.
	DefaultMinBackoff = 100 * time.Millisecond
	// DefaultMaxBackoff caps the wait between attempts.
	DefaultMaxBackoff = 30 * time.Second
	// DefaultBatchSize is how many pending commands are read at once.
	DefaultBatchSize = 100
)

// markTimeout bounds the transaction that records a delivery. It runs even
// when the dispatcher's context was cancelled during the call, because a
// delivery that happened and is not recorded is delivered again.
const markTimeout = 30 * time.Second

// Delivery is one attempt to deliver a command.
type Delivery struct {
	// ID is the command's outbox id.
	ID int64
	// Resource is the command's resource.
	Resource string
	// Token is the token the command was enqueued with.
	Token fence.Token
	// Payload is the command's payload.
	Payload []byte
	// Key is IdempotencyKey(Resource, Token). Send it with the call; it is
	// the same on every attempt.
	Key string
	// Attempt counts the attempts begun for this command, this one
	// included: 1 the first time. Above 1, an earlier attempt failed, or
	// was interrupted by a crash and may have reached the receiver.
	Attempt int
}

// Dispatcher delivers the outbox's commands, one at a time, in the order
// of their ids. Only one dispatcher runs per database: Run and Drain hold
// the session-level advisory lock AdvisoryLockKey on their connection and
// return ErrAlreadyRunning when another holds it.
//
// For each pending command the dispatcher
//
//  1. drops it, recording why, if the dispatcher is pinned to an issuer
//     (Issuer) and the command was enqueued under another one;
//  2. in one transaction, applies the watermark rule to the command's
//     resource (WatermarkTable, shared with Guard) and counts the attempt:
//     a token below the watermark drops the command (recording the
//     presented and the required token); an equal or higher one raises the
//     watermark before the call, so that a lower token is refused from
//     then on;
//  3. calls Deliver with the idempotency key;
//  4. on success, marks the command delivered in the same transaction that
//     raises the watermark to at least its token. On error, it records the
//     error, waits (exponential backoff from MinBackoff to MaxBackoff) and
//     goes back to step 2 with the same key; the command holds up the
//     ones after it, to keep the order. A Permanent error marks it failed
//     instead, and the dispatcher moves on.
//
// A command is delivered again only if the dispatcher stopped between the
// start of step 3 and the commit of step 4: a crash, a lost connection, or
// a Deliver that returned an error although the receiver had acted. The
// next dispatcher then repeats the call, with the same key and a higher
// Attempt. Whether the receiver then applies it once depends on the
// receiver honouring the key.
//
// A Dispatcher's zero fields take the defaults above; Deliver is required.
// Do not change the fields while it runs.
type Dispatcher struct {
	// Deliver makes the side effect. It gets the context of Run or Drain.
	// It must return nil only when the receiver has accepted the command,
	// an error otherwise (retried), or a Permanent error (not retried).
	// It should send d.Key so that a repeated call is applied once.
	Deliver func(ctx context.Context, d Delivery) error
	// Issuer, when not empty, pins the dispatcher to the issuer (fenced
	// cluster) with that id: commands enqueued under another issuer, or
	// with none presented, are dropped.
	Issuer string
	// PollInterval is how long Run waits before looking for new commands
	// when there are none; DefaultPollInterval if zero.
	PollInterval time.Duration
	// MinBackoff is the wait after the first failed attempt; it doubles
	// with each further failure up to MaxBackoff. Defaults
	// DefaultMinBackoff and DefaultMaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// BatchSize is how many pending commands are read at once;
	// DefaultBatchSize if zero.
	BatchSize int
	// Logger receives a line for each drop, failure and retry; none if nil.
	Logger *slog.Logger
}

// pending is a command read from the outbox.
type pending struct {
	id       int64
	resource string
	token    fence.Token
	issuer   string
	payload  []byte
}

// Run delivers commands until ctx is done or an error other than a
// delivery error occurs. It holds conn for the whole time: conn must be a
// dedicated connection (pgx.Connect, or pgxpool.Pool.Acquire then
// Conn()), because the advisory lock that keeps a second dispatcher out
// belongs to it and every statement of the dispatcher runs on it. If the
// connection is lost, the lock is released and Run returns an error without
// touching the outbox again; a new dispatcher takes over.
//
// Run returns ErrAlreadyRunning at once when another dispatcher runs,
// ctx.Err() when ctx is done, and otherwise the database error that
// stopped it. Cancelling ctx interrupts a Deliver call (if it honours
// its context) and the backoff waits; a delivery that Deliver reported as
// successful is still recorded.
func (d *Dispatcher) Run(ctx context.Context, conn *pgx.Conn) error {
	_, err := d.run(ctx, conn, false)
	return err
}

// Drain delivers the commands pending when it starts, and any that arrive
// meanwhile, then returns how many commands it handled (delivered, dropped
// or failed). Like
// Run, it holds the advisory lock on conn while it works and returns
// ErrAlreadyRunning when another dispatcher runs.
func (d *Dispatcher) Drain(ctx context.Context, conn *pgx.Conn) (n int, err error) {
	return d.run(ctx, conn, true)
}

func (d *Dispatcher) run(ctx context.Context, conn *pgx.Conn, drain bool) (n int, err error) {
	if d.Deliver == nil {
		return 0, fmt.Errorf("%w: outbox: Dispatcher.Deliver is nil", fence.ErrInvalidArgument)
	}
	var locked bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", AdvisoryLockKey).Scan(&locked); err != nil {
		return 0, errorf("take the dispatcher lock: %w", err)
	}
	if !locked {
		return 0, ErrAlreadyRunning
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		conn.Exec(uctx, "SELECT pg_advisory_unlock($1)", AdvisoryLockKey) // fails harmlessly on a lost connection
	}()

	marks := postgres.New(conn, postgres.WithTable(WatermarkTable))
	for {
		batch, err := d.fetch(ctx, conn)
		if err != nil {
			return n, stopped(ctx, err)
		}
		if len(batch) == 0 {
			if drain {
				return n, nil
			}
			if err := sleep(ctx, d.pollInterval()); err != nil {
				return n, err
			}
			continue
		}
		for _, c := range batch {
			if err := d.dispatch(ctx, conn, marks, c); err != nil {
				return n, stopped(ctx, err)
			}
			n++
		}
	}
}

// stopped returns ctx's error when ctx is done, err otherwise.
func stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

func (d *Dispatcher) fetch(ctx context.Context, conn *pgx.Conn) ([]pending, error) {
	rows, err := conn.Query(ctx, "SELECT id, resource, token, issuer, payload FROM "+Table+
		" WHERE state = 'pending' ORDER BY id LIMIT $1", d.batchSize())
	if err != nil {
		return nil, errorf("read pending commands: %w", err)
	}
	batch, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (pending, error) {
		var p pending
		var tok int64
		err := r.Scan(&p.id, &p.resource, &tok, &p.issuer, &p.payload)
		p.token = fence.Token(tok)
		return p, err
	})
	if err != nil {
		return nil, errorf("read pending commands: %w", err)
	}
	return batch, nil
}

// dispatch delivers, drops or fails one command. It returns an error only
// when the dispatcher must stop.
func (d *Dispatcher) dispatch(ctx context.Context, conn *pgx.Conn, marks *postgres.Guard, c pending) error {
	log := d.logger().With("id", c.id, "resource", c.resource, "token", uint64(c.token))
	if d.Issuer != "" && c.issuer != d.Issuer {
		reason := fmt.Sprintf("issuer %q is not the pinned issuer %q", c.issuer, d.Issuer)
		log.Warn("outbox: dropping command", "reason", reason)
		return finish(ctx, conn, c.id, StateDropped, reason)
	}
	key := IdempotencyKey(c.resource, c.token)
	for {
		// Step 2: check and raise the watermark, and count the attempt,
		// before the call.
		attempt := 0
		err := marks.InTx(ctx, c.resource, c.token, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, "UPDATE "+Table+" SET attempts = attempts + 1, attempted_at = now() WHERE id = $1 AND state = 'pending' RETURNING attempts", c.id).Scan(&attempt)
		})
		var stale *fence.StaleTokenError
		switch {
		case errors.As(err, &stale):
			// Watermarks only grow: the command stays stale.
			log.Warn("outbox: dropping stale command", "required", uint64(stale.Required))
			return finish(ctx, conn, c.id, StateDropped, stale.Error())
		case errors.Is(err, pgx.ErrNoRows):
			return nil // no longer pending: changed by hand
		case err != nil:
			return errorf("claim command %d: %w", c.id, err)
		}

		// Step 3: the call.
		derr := d.Deliver(ctx, Delivery{ID: c.id, Resource: c.resource, Token: c.token, Payload: c.payload, Key: key, Attempt: attempt})
		if derr == nil {
			// Step 4, even if ctx was cancelled meanwhile: an unrecorded
			// delivery would be repeated.
			mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), markTimeout)
			defer cancel()
			return delivered(mctx, conn, c)
		}
		if isPermanent(derr) {
			log.Warn("outbox: command failed permanently", "attempt", attempt, "err", derr)
			return finish(ctx, conn, c.id, StateFailed, derr.Error())
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := d.backoff(attempt)
		log.Info("outbox: delivery failed; retrying with the same key", "attempt", attempt, "err", derr, "wait", wait)
		if _, err := conn.Exec(ctx, "UPDATE "+Table+" SET last_error = $2 WHERE id = $1", c.id, derr.Error()); err != nil {
			return errorf("record delivery error of command %d: %w", c.id, err)
		}
		if err := sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// delivered marks c delivered in the transaction that raises its
// resource's watermark to at least its token.
func delivered(ctx context.Context, conn *pgx.Conn, c pending) error {
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO "+WatermarkTable+` AS w (object, token, updated_at) VALUES ($1, $2, now())
ON CONFLICT (object) DO UPDATE SET token = GREATEST(w.token, EXCLUDED.token), updated_at = now()`, c.resource, int64(c.token)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "UPDATE "+Table+" SET state = 'delivered', done_at = now(), last_error = NULL WHERE id = $1", c.id)
		return err
	})
	if err != nil {
		return errorf("record delivery of command %d (it will be delivered again with key %q): %w", c.id, IdempotencyKey(c.resource, c.token), err)
	}
	return nil
}

// finish records that a command was dropped or failed, and why.
func finish(ctx context.Context, conn *pgx.Conn, id int64, state State, reason string) error {
	_, err := conn.Exec(ctx, "UPDATE "+Table+" SET state = $2, reason = $3, done_at = now() WHERE id = $1 AND state = 'pending'", id, string(state), reason)
	if err != nil {
		return errorf("mark command %d %s: %w", id, state, err)
	}
	return nil
}

// backoff returns the wait after the attempt-th failure.
func (d *Dispatcher) backoff(attempt int) time.Duration {
	lo, hi := d.MinBackoff, d.MaxBackoff
	if lo <= 0 {
		lo = DefaultMinBackoff
	}
	if hi <= 0 {
		hi = DefaultMaxBackoff
	}
	w := lo
	for i := 1; i < attempt && w < hi; i++ {
		w *= 2
	}
	return min(w, hi)
}

func (d *Dispatcher) pollInterval() time.Duration {
	if d.PollInterval > 0 {
		return d.PollInterval
	}
	return DefaultPollInterval
}

func (d *Dispatcher) batchSize() int {
	if d.BatchSize > 0 {
		return d.BatchSize
	}
	return DefaultBatchSize
}

func (d *Dispatcher) logger() *slog.Logger {
	if d.Logger != nil {
		return d.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
