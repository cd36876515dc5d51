package grpcfence

import (
	"context"
	"errors"

	fence "github.com/fenced-dev/fenced"
)

// Errors of Do. Both report a programming error in the server, not a
// problem of the call; Error leaves them unchanged.
var (
	// ErrNoFence reports a context without a fenced call: the handler is not
	// behind the interceptors, or its method is not fenced (Config.Fenced).
	ErrNoFence = errors.New("grpcfence: no fencing token in the context; is the server using the interceptors and is this method fenced?")
	// ErrNoStore reports interceptors without a Store: set Config.Store, or
	// write through your own guard with the token of TokenFrom.
	ErrNoStore = errors.New("grpcfence: no Store configured; set Config.Store or check the token of TokenFrom in your own guard")
)

// serverFence is what the interceptors put into a fenced call's context.
type serverFence struct {
	object string
	token  fence.Token
	store  Store
	// held is set inside the interceptor's own critical section
	// (AroundHandler): Do then only runs apply.
	held bool
}

type serverKey struct{}

func withServerFence(ctx context.Context, f *serverFence) context.Context {
	return context.WithValue(ctx, serverKey{}, f)
}

func serverFenceFrom(ctx context.Context) *serverFence {
	f, _ := ctx.Value(serverKey{}).(*serverFence)
	return f
}

// TokenFrom returns the object and token of the fenced call whose context
// is ctx, as the interceptor parsed and validated them; ok is false when
// the call was not fenced. The issuer presented with them, if any, is
// guard.IssuerFromContext(ctx).
//
// Handlers whose store has no Store adapter pass them to their own guard,
// in the same transaction or script as the write (PostgreSQL, Redis).
func TokenFrom(ctx context.Context) (object string, t fence.Token, ok bool) {
	f := serverFenceFrom(ctx)
	if f == nil {
		return "", 0, false
	}
	return f.object, f.token, true
}

// Do runs apply as the handler's protected write, atomically with the
// check of the call's token: it calls the Store's Do with the object and
// token of TokenFrom(ctx), so the check, apply and the raise of the
// watermark are one step and two calls for the same object cannot
// interleave between check and write. apply must do the whole write; when
// it returns an error the watermark stays unchanged and Do returns that
// error.
//
// Behind interceptors in AroundHandler mode the check is already held for
// the whole handler; Do then calls apply directly (it does not deadlock).
//
// Do returns a *fence.StaleTokenError for a stale token, errors matching
// fence.ErrInvalidToken or fence.ErrIssuerMismatch from the store (return
// them from the handler: the interceptor turns them into statuses),
// ErrNoFence when ctx is not a fenced call's and ErrNoStore when the
// interceptors have no Store.
func Do(ctx context.Context, apply func(ctx context.Context) error) error {
	f := serverFenceFrom(ctx)
	switch {
	case f == nil:
		return ErrNoFence
	case f.held:
		return apply(ctx)
	case f.store == nil:
		return ErrNoStore
	}
	return f.store.Do(ctx, f.object, f.token, apply)
}
