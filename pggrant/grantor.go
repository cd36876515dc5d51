package pggrant

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	fence "github.com/fenced-dev/fenced"
)

// DefaultRecheck is the fallback re-check interval unless WithRecheck
// sets another: the longest a waiter goes without trying again when no
// notification comes (a notification lost while the listening connection
// was down, or a holder that keeps renewing).
const DefaultRecheck = 10 * time.Second

// The bounds of WithRecheck.
const (
	MinRecheck = 100 * time.Millisecond
	MaxRecheck = 10 * time.Minute
)

// channel is the LISTEN/NOTIFY channel a release notifies, with the
// lock's name as the payload.
const channel = "fence_lock_grants"

// Grantor issues fenced locks from a PostgreSQL table (fence_lock_grants):
// a fence.Grantor, with the same interface as the fenced server's
// client.Grantor. Create it with Open or New; it is safe for concurrent
// use. See the package documentation for what PostgreSQL can and cannot
// promise.
type Grantor struct {
	pool    *pgxpool.Pool
	own     bool // Close closes pool
	issuer  string
	recheck time.Duration
	lis     *listener
	turns   turns
	// maxHandoffs bounds direct handoffs in a row (WithMaxHandoffs).
	maxHandoffs int
	// onSleep, set only by tests before any Acquire, is called when a
	// waiter has tried and goes to sleep.
	onSleep func(name string)

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	mu     sync.Mutex
	held   map[*held]struct{}
	closed bool
	// offers are the waiters' handoff offers, by name, oldest first;
	// streaks the direct handoffs in a row, by name.
	offers  map[string][]*offer
	streaks map[string]int
}

var _ fence.Grantor = (*Grantor)(nil)

// An Option configures a Grantor.
type Option func(*options)

type options struct {
	recheck     time.Duration
	maxHandoffs int
}

// WithRecheck sets the fallback re-check interval, within
// MinRecheck..MaxRecheck (default DefaultRecheck). Waiters are woken by
// LISTEN/NOTIFY when a holder releases, and at the holder's expires_at
// when it stops renewing; the re-check only bounds how long a waiter
// sleeps when a notification was lost.
func WithRecheck(d time.Duration) Option { return func(o *options) { o.recheck = d } }

// Open connects to the PostgreSQL database at dsn and returns a Grantor
// on it that closes its connections on Close. A DSN that does not parse
// or connect, or a database whose schema is not at SchemaVersion (run
// Migrate first), is an error and nothing is written.
func Open(ctx context.Context, dsn string, opts ...Option) (*Grantor, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pggrant: parse the connection string: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pggrant: connect: %w", err)
	}
	g, err := New(ctx, pool, opts...)
	if err != nil {
		pool.Close()
		return nil, err
	}
	g.own = true
	return g, nil
}

// New returns a Grantor on pool, which the caller keeps and closes after
// the Grantor's Close. It checks that the database can be reached and
// that its schema is at SchemaVersion (an error wrapping ErrSchema naming
// the migrations to run otherwise); it writes nothing.
func New(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*Grantor, error) {
	o := options{recheck: DefaultRecheck, maxHandoffs: DefaultMaxHandoffs}
	for _, opt := range opts {
		opt(&o)
	}
	if o.recheck < MinRecheck || o.recheck > MaxRecheck {
		return nil, fmt.Errorf("pggrant: %w: recheck interval %v is outside %v..%v", fence.ErrInvalidArgument, o.recheck, MinRecheck, MaxRecheck)
	}
	if o.maxHandoffs < 0 || o.maxHandoffs > MaxHandoffsLimit {
		return nil, fmt.Errorf("pggrant: %w: max handoffs %d is outside 0..%d", fence.ErrInvalidArgument, o.maxHandoffs, MaxHandoffsLimit)
	}
	cfg := pool.Config().ConnConfig
	if err := pool.Ping(ctx); err != nil {
		return nil, fmt.Errorf("pggrant: connect to %s:%d database %q: %w", cfg.Host, cfg.Port, cfg.Database, err)
	}
	issuer, err := checkSchema(ctx, pool)
	if err != nil {
		return nil, err
	}
	g := &Grantor{pool: pool, issuer: issuer, recheck: o.recheck, maxHandoffs: o.maxHandoffs,
		held: map[*held]struct{}{}, offers: map[string][]*offer{}, streaks: map[string]int{}}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	g.lis = newListener(g)
	return g, nil
}

// Issuer returns the issuer of the Grantor's tokens: an id the migration
// stored once in the database (fence_grantor_schema). Tokens are
// comparable only between grants of the same name and issuer.
func (g *Grantor) Issuer() string { return g.issuer }

// Close ends the Grantor: its grants end locally (Done closes) and are
// released, for at most a few seconds (the store expires what it cannot
// release), the listener stops, and a pool from Open is closed.
func (g *Grantor) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	hs := make([]*held, 0, len(g.held))
	for h := range g.held {
		hs = append(hs, h)
	}
	g.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, h := range hs {
		h.Release(ctx)
	}
	g.cancel()
	g.lis.wait()
	if g.own {
		g.pool.Close()
	}
	return nil
}

// MaxTokenSQL is the query MaxToken runs, for reading the floor with psql.
const MaxTokenSQL = `SELECT greatest((SELECT coalesce(max(fencing_token), 0) FROM fence_lock_grants),
	(SELECT coalesce(max(claim_token), 0) FROM fence_work_claims))`

// MaxToken returns the highest token the database has issued, of any
// lock or claim (0 if none): start the fenced server with --token-floor at
// least this to move the names to it with tokens that keep rising.
func (g *Grantor) MaxToken(ctx context.Context) (fence.Token, error) {
	var t int64
	if err := g.pool.QueryRow(ctx, MaxTokenSQL).Scan(&t); err != nil {
		return 0, fmt.Errorf("pggrant: read the highest token: %w", err)
	}
	return fence.Token(t), nil
}

// grantSQL grants name to holder for $3 milliseconds if it is free or its
// grant expired, raising the row's counter (or creating the row with
// token 1), in one statement on the database's clock; or returns how long
// the current grant has left. The UPDATE locks the row only when it takes
// it, and an INSERT that conflicts does nothing: a try that finds the
// name held writes nothing (no row lock, no WAL flush), so waiters woken
// together do not queue on each other's commits.
const grantSQL = `
WITH u AS (
	UPDATE fence_lock_grants
	SET holder = $2, fencing_token = fencing_token + 1, granted_at = now(),
	    expires_at = now() + $3 * interval '1 millisecond'
	WHERE name = $1 AND (holder IS NULL OR expires_at <= now())
	RETURNING fencing_token, granted_at
), i AS (
	INSERT INTO fence_lock_grants (name, holder, fencing_token, granted_at, expires_at)
	SELECT $1, $2, 1, now(), now() + $3 * interval '1 millisecond'
	WHERE NOT EXISTS (SELECT 1 FROM u)
	ON CONFLICT (name) DO NOTHING
	RETURNING fencing_token, granted_at
)
SELECT fencing_token, granted_at, NULL::float8 FROM u
UNION ALL
SELECT fencing_token, granted_at, NULL::float8 FROM i
UNION ALL
SELECT NULL, NULL, extract(epoch FROM l.expires_at - now()) * 1000
	FROM fence_lock_grants l
	WHERE l.name = $1 AND NOT EXISTS (SELECT 1 FROM u) AND NOT EXISTS (SELECT 1 FROM i)`

// Acquire implements fence.Grantor. A waiter (fence.Wait) tries, then
// sleeps until a release is notified, the current grant's expires_at
// comes, or the re-check interval passes, and tries again. The waiters of
// one Grantor take turns in arrival order (only the first of them tries);
// waiters of different Grantors are not ordered. Every waiter also offers
// to take the lock over directly: a release by a holder of the same
// Grantor grants it to the oldest waiter in the same statement
// (WithMaxHandoffs).
func (g *Grantor) Acquire(ctx context.Context, name string, opts ...fence.AcquireOption) (fence.Held, error) {
	o, err := fence.AcquireOptionsOf(opts...)
	if err == nil {
		err = fence.ValidateName(name)
	}
	if err != nil {
		return nil, fmt.Errorf("pggrant: acquire %q: %w", name, err)
	}
	if g.ctx.Err() != nil {
		return nil, fmt.Errorf("pggrant: acquire %q: the grantor is closed", name)
	}
	holder := randomHex()
	if !o.Wait {
		h, _, err := g.try(ctx, name, holder, o.TTL)
		if err == nil && h == nil {
			err = fmt.Errorf("pggrant: acquire %q: %w: another holder has it", name, fence.ErrNotGranted)
		}
		return h, err
	}
	turn, leave := g.turns.join(name)
	defer leave()
	// The waiter's handoff offer is up from now to its end, its tries
	// included, in arrival order with the Grantor's other waiters: a
	// holder that releases hands the lock to the oldest. A try and a
	// handoff cannot both grant: the handoff needs a live grant of the
	// releaser, the try none.
	of := &offer{holder: holder, ttl: o.TTL, got: make(chan *held, 1)}
	g.offerHandoff(name, of)
	posted := true // of is up, or taken and its outcome not yet received
	// finish withdraws the offer and returns the outcome: a grant from
	// the try or a handoff, or err; a grant the caller no longer wants is
	// released.
	finish := func(h *held, err error) (fence.Held, error) {
		var handed *held
		if posted {
			handed = g.withdrawOffer(name, of)
		}
		if handed != nil && h == nil && err == nil {
			h = handed
		} else if handed != nil {
			rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			handed.Release(rctx)
			cancel()
		}
		if h != nil && err == nil && ctx.Err() != nil {
			rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			h.Release(rctx)
			cancel()
			return nil, fmt.Errorf("pggrant: acquire %q: %w", name, ctx.Err())
		}
		if err != nil {
			return nil, err
		}
		return h, nil
	}
	// handedOver receives a releaser's outcome: the grant, or nil (it
	// could not hand over: the offer goes up again).
	handedOver := func(h *held) bool {
		posted = false
		if h != nil {
			return true
		}
		g.offerHandoff(name, of)
		posted = true
		return false
	}
	for waiting := true; waiting; {
		select {
		case <-turn:
			waiting = false
		case h := <-of.got:
			if handedOver(h) {
				return finish(h, nil)
			}
		case <-ctx.Done():
			return finish(nil, fmt.Errorf("pggrant: acquire %q: %w", name, ctx.Err()))
		case <-g.ctx.Done():
			return finish(nil, fmt.Errorf("pggrant: acquire %q: the grantor is closed", name))
		}
	}
	wake, stop := g.lis.watch(name)
	defer stop()
	for {
		h, left, err := g.try(ctx, name, holder, o.TTL)
		if err != nil || h != nil {
			return finish(h, err)
		}
		t := time.NewTimer(min(g.recheck, left+time.Millisecond))
		if g.onSleep != nil {
			g.onSleep(name)
		}
		select {
		case h := <-of.got:
			if handedOver(h) {
				t.Stop()
				return finish(h, nil)
			}
		case <-wake:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return finish(nil, fmt.Errorf("pggrant: acquire %q: %w", name, ctx.Err()))
		case <-g.ctx.Done():
			t.Stop()
			return finish(nil, fmt.Errorf("pggrant: acquire %q: the grantor is closed", name))
		}
		t.Stop()
	}
}

// try runs grantSQL once. It returns the grant, or nil and how long the
// current one has left.
func (g *Grantor) try(ctx context.Context, name, holder string, ttl time.Duration) (*held, time.Duration, error) {
	sent := time.Now()
	rows, err := g.pool.Query(ctx, grantSQL, name, holder, ttl.Milliseconds())
	if err != nil {
		g.withdraw(name, holder, err)
		return nil, 0, g.acquireErr(ctx, name, err)
	}
	var (
		token     *int64
		grantedAt *time.Time
		leftMs    *float64
		found     bool
	)
	for rows.Next() {
		if err := rows.Scan(&token, &grantedAt, &leftMs); err != nil {
			rows.Close()
			return nil, 0, g.acquireErr(ctx, name, err)
		}
		found = true
	}
	if err := rows.Err(); err != nil {
		g.withdraw(name, holder, err)
		return nil, 0, g.acquireErr(ctx, name, err)
	}
	switch {
	case !found:
		// Lost a race with another's first insert of the row, which the
		// statement's snapshot did not see: try again soon.
		return nil, 10 * time.Millisecond, nil
	case token == nil:
		return nil, time.Duration(max(*leftMs, 0) * float64(time.Millisecond)), nil
	}
	if ctx.Err() != nil {
		// The caller gave up while the grant was on its way: undo it.
		h := g.newHeld(name, holder, fence.Token(*token), *grantedAt, ttl, sent)
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h.Release(rctx)
		return nil, 0, fmt.Errorf("pggrant: acquire %q: %w", name, ctx.Err())
	}
	h := g.newHeld(name, holder, fence.Token(*token), *grantedAt, ttl, sent)
	if !g.keep(h) {
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h.Release(rctx)
		return nil, 0, fmt.Errorf("pggrant: acquire %q: the grantor is closed", name)
	}
	return h, 0, nil
}

// keep records h among the Grantor's grants (Close releases them); false
// when the Grantor is closed, and h must be released.
func (g *Grantor) keep(h *held) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.held[h] = struct{}{}
	return true
}

// acquireErr explains a failed grant statement. Its outcome is unknown
// when the failure came after it was sent: withdraw has tried to undo it,
// and a grant it made that the withdrawal could not reach ends with its
// TTL (holder ids are random, so nothing else renews it).
func (g *Grantor) acquireErr(ctx context.Context, name string, err error) error {
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "22003": // numeric_value_out_of_range
		return fmt.Errorf("pggrant: acquire %q: %w: the name's token counter reached %d", name, fence.ErrTokenOverflow, uint64(fence.MaxToken))
	case errors.As(err, &pgErr) && pgErr.Code == "42P01": // undefined_table
		return fmt.Errorf("pggrant: acquire %q: %w: %v; run pggrant.Migrate", name, ErrSchema, err)
	case ctx.Err() != nil:
		return fmt.Errorf("pggrant: acquire %q: %w", name, ctx.Err())
	}
	return fmt.Errorf("pggrant: acquire %q: %w", name, err)
}

// withdrawSQL ends whatever grant of name holder has, and wakes the
// waiters if there was one.
const withdrawSQL = `
WITH r AS (
	UPDATE fence_lock_grants SET holder = NULL, expires_at = now()
	WHERE name = $1 AND holder = $2
	RETURNING name
)
SELECT count(pg_notify('` + channel + `', name)) FROM r`

// withdraw undoes a grant statement that failed with err after it may
// have been applied (its answer lost, or the caller's context ended in
// flight), best effort and for at most a few seconds: the holder id is
// this attempt's alone, so nothing else is touched. A statement the
// database refused (err is a PostgreSQL error) was not applied.
func (g *Grantor) withdraw(name, holder string, err error) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) || pgconn.SafeToRetry(err) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var n int64
	g.pool.QueryRow(ctx, withdrawSQL, name, holder).Scan(&n)
}

func (g *Grantor) forget(h *held) {
	g.mu.Lock()
	delete(g.held, h)
	g.mu.Unlock()
}

// randomHex returns 128 random bits in hex: a holder id no one can guess.
func randomHex() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}

// exec is a statement with its rows affected.
func exec(ctx context.Context, db *pgxpool.Pool, sql string, args ...any) (int64, error) {
	tag, err := db.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}
