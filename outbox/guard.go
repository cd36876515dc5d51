package outbox

import (
	"context"

	"github.com/jackc/pgx/v5"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/postgres"
)

// DB is what the outbox needs to run its own transactions: *pgxpool.Pool
// and *pgx.Conn implement it.
type DB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Guard is the local guard for a side effect that cannot check tokens
// itself (an e-mail, a payment API, an actuator). Before the call, Before
// checks the caller's token against the resource's watermark and raises
// the watermark to it, in a committed transaction, and returns the
// idempotency key to send with the call.
//
// This narrows the window; it does not fence. The target never sees the
// check: a caller that passed Before and then paused (GC, SIGSTOP, a slow
// network) can still reach the target after a newer holder did. What Guard
// guarantees is that once a token has passed Before, no lower token passes
// it again, and that the dispatcher of this package drops queued commands
// whose token is below the watermark. Pair it with the idempotency key so
// that retries of one side effect are applied once.
//
// Guard shares its watermarks (WatermarkTable) with the Dispatcher, so a
// resource may be driven by direct calls and by the outbox at once.
//
// Guard is also a fence.Guard: Do runs a function in the transaction that
// checks and raises the resource's watermark (postgres.TxFromContext gives
// it), which is where a fenced worker or HTTP handler enqueues commands
// (Enqueue) for the dispatcher. What Do makes atomic with the check is what
// the function writes in that transaction; a call to the target made from
// it is no more fenced than one made after Before.
type Guard struct {
	pg *postgres.Guard
}

var _ fence.Guard = (*Guard)(nil)

// An Option configures a Guard.
type Option func(*options)

type options struct {
	issuer string
}

// WithIssuer pins the guard to the issuer (fenced cluster) with id: calls
// are refused with an error matching fence.ErrIssuerMismatch unless the
// context presents the same issuer (guard.ContextWithIssuer).
func WithIssuer(id string) Option {
	return func(o *options) { o.issuer = id }
}

// NewGuard returns a Guard that keeps its watermarks in db's
// WatermarkTable. Run Migrate first.
func NewGuard(db DB, opts ...Option) *Guard {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return &Guard{pg: postgres.New(db, postgres.WithTable(WatermarkTable), postgres.WithIssuer(o.issuer))}
}

// Before records that a side effect on resource is about to be made under
// token t: it applies the watermark rule (a token below the watermark is
// rejected with a *fence.StaleTokenError; an equal or higher one is
// accepted and becomes the watermark) and commits, then returns
// IdempotencyKey(resource, t) to send with the call. Make the call only
// when the error is nil. Invalid tokens are refused with an error matching
// fence.ErrInvalidToken.
func (g *Guard) Before(ctx context.Context, resource string, t fence.Token) (key string, err error) {
	if err := g.Do(ctx, resource, t, nil); err != nil {
		return "", err
	}
	return IdempotencyKey(resource, t), nil
}

// Check is Before without the key: Do without an apply.
func (g *Guard) Check(ctx context.Context, resource string, t fence.Token) error {
	return g.Do(ctx, resource, t, nil)
}

// Do implements fence.Guard with postgres.Guard.Do on the outbox's
// watermarks: apply runs in the transaction that checks t against
// resource's watermark and raises it, and takes that transaction from its
// context with postgres.TxFromContext, for example to Enqueue a command:
//
//	err := g.Do(ctx, "order-7/shipping-email", grant.Token, func(ctx context.Context) error {
//		tx, _ := postgres.TxFromContext(ctx)
//		_, err := outbox.Enqueue(ctx, tx, outbox.Command{Resource: "order-7/shipping-email", Token: grant.Token, Payload: body})
//		return err
//	})
//
// Errors are those of Before; an error of apply rolls everything back and
// is returned unchanged.
func (g *Guard) Do(ctx context.Context, resource string, t fence.Token, apply func(ctx context.Context) error) error {
	return g.pg.Do(ctx, resource, t, apply)
}

// Watermark returns the highest token that has passed Before, or that a
// dispatcher has claimed, for resource; 0 if none.
func (g *Guard) Watermark(ctx context.Context, resource string) (fence.Token, error) {
	return g.pg.Watermark(ctx, resource)
}
