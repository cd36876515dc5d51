package grpcfence

import (
	"context"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
)

// Store keeps the watermarks the interceptors and Do check tokens against.
//
// Do applies the watermark rule of DESIGN.md §5 to token t for object and,
// only when t is accepted, calls apply; the check, apply and the raise of the
// watermark to t must be one atomic step: no other Do for the same object
// may check or apply in between, and when apply returns an error the
// watermark stays unchanged and Do returns that error unchanged (so
// errors.Is and errors.As see it). Do calls apply at most once (the gRPC
// handler inside it is not idempotent) and passes it a context derived from
// ctx; a store may put its transaction into that context for apply to use.
//
// Do returns a *fence.StaleTokenError when t is below the watermark, an
// error matching fence.ErrInvalidToken when t is outside 1..fence.MaxToken,
// and an error matching fence.ErrIssuerMismatch when the store is pinned to
// an issuer and the one presented in ctx (guard.IssuerFromContext) differs.
//
// guard.Memory fits through MemoryStore. A store that keeps watermarks in a
// database fits when apply runs inside the transaction that checks and
// raises the watermark (for example a PostgreSQL guard's InTx). A bare
// fence.Guard (Check only) does not fit: a check followed by a separate
// write is exactly the race fencing exists to close.
//
// The interface has the same method set as httpfence.Store, so one
// implementation serves both packages.
type Store interface {
	Do(ctx context.Context, object string, t fence.Token, apply func(ctx context.Context) error) error
}

// StoreFunc adapts a function to the Store interface, typically a closure
// around a guard whose atomic step has another signature:
//
//	store := grpcfence.StoreFunc(func(ctx context.Context, object string, t fence.Token, apply func(context.Context) error) error {
//		return pg.InTx(ctx, object, t, func(tx pgx.Tx) error { return apply(withTx(ctx, tx)) })
//	})
type StoreFunc func(ctx context.Context, object string, t fence.Token, apply func(ctx context.Context) error) error

var _ Store = StoreFunc(nil)

// Do implements Store by calling f.
func (f StoreFunc) Do(ctx context.Context, object string, t fence.Token, apply func(ctx context.Context) error) error {
	return f(ctx, object, t, apply)
}

// MemoryStore returns a Store over g: the check, apply and the raise run
// under g's lock (guard.Memory.Do). Its watermarks live in this process
// only: they protect a resource that only this process writes, and they
// are lost when the process exits. guard.Memory has one lock for all
// objects, so apply calls of different objects also run one at a time
// (which matters in AroundHandler mode, where apply is the whole handler).
// It does not pin an issuer; set Config.Issuer for that.
func MemoryStore(g *guard.Memory) Store {
	return StoreFunc(func(ctx context.Context, object string, t fence.Token, apply func(ctx context.Context) error) error {
		return g.Do(object, t, func() error { return apply(ctx) })
	})
}
