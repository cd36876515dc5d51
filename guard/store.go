package guard

import (
	"context"

	fence "github.com/fenced-dev/fenced"
)

// Store keeps the watermarks that Do, and the HTTP middleware and gRPC
// interceptors (httpfence, grpcfence) in AroundHandler mode, check tokens
// against.
//
// Do applies the watermark rule of docs/design.md §5 to token t for object and,
// only when t is accepted, calls apply; the check, apply and the raise of the
// watermark to t must be one atomic step: no other Do for the same object
// may check or apply in between, and when apply returns an error the
// watermark stays unchanged and Do returns that error unchanged (so
// errors.Is and errors.As see it). Do calls apply at most once (a request
// handler inside it is not idempotent) and passes it a context derived from
// ctx; a store may put its transaction into that context for apply to use.
//
// Do returns a *fence.StaleTokenError when t is below the watermark, an
// error matching fence.ErrInvalidToken when t is outside 1..fence.MaxToken,
// and an error matching fence.ErrIssuerMismatch when the store is pinned to
// an issuer and the one presented in ctx (IssuerFromContext) differs.
//
// *Memory is a Store. A store that keeps watermarks in a database fits,
// through StoreFunc, when apply runs inside the transaction that checks and
// raises the watermark (for example a PostgreSQL guard's InTx). A bare
// fence.Guard (Check only) does not fit: a check followed by a separate
// write is exactly the race fencing exists to close.
type Store interface {
	Do(ctx context.Context, object string, t fence.Token, apply func(ctx context.Context) error) error
}

// StoreFunc adapts a function to the Store interface, typically a closure
// around a guard whose atomic step has another signature:
//
//	store := guard.StoreFunc(func(ctx context.Context, object string, t fence.Token, apply func(context.Context) error) error {
//		return pg.InTx(ctx, object, t, func(tx pgx.Tx) error { return apply(withTx(ctx, tx)) })
//	})
type StoreFunc func(ctx context.Context, object string, t fence.Token, apply func(ctx context.Context) error) error

var _ Store = StoreFunc(nil)

// Do implements Store by calling f.
func (f StoreFunc) Do(ctx context.Context, object string, t fence.Token, apply func(ctx context.Context) error) error {
	return f(ctx, object, t, apply)
}
