package guard

import (
	"context"
	"errors"

	fence "github.com/fenced-dev/fenced"
)

// Errors of Do. Both report a programming error in the server, not a
// problem of the request: httpfence.WriteError and grpcfence.Error leave
// them to the caller.
var (
	// ErrNoFence reports a context without a fenced request: the handler
	// is not behind the fencing middleware or interceptors (httpfence,
	// grpcfence), or its request's method is not fenced (their
	// Config.Fenced).
	ErrNoFence = errors.New("guard: no fencing token in the context; is the handler behind the fencing middleware or interceptors, and is this method fenced?")
	// ErrNoGuard reports a fenced request without a fence.Guard: set the
	// middleware's or interceptors' Config.Guard, or write through your own
	// guard with the token of TokenFrom.
	ErrNoGuard = errors.New("guard: no fence.Guard configured; set Config.Guard or check the token of TokenFrom in your own guard")
)

// serving is the fence of a request being served: what WithFence puts into
// its context.
type serving struct {
	object string
	token  fence.Token
	guard  fence.Guard
	// held is set inside the guard's atomic step for this fence: the check
	// has passed and the watermark is raised when the step succeeds, so Do
	// only runs apply.
	held bool
}

type servingKey struct{}

func servingFrom(ctx context.Context) *serving {
	f, _ := ctx.Value(servingKey{}).(*serving)
	return f
}

// WithFence returns a context for serving a request that presented token t
// for object: TokenFrom returns them and Do checks t against g (nil when
// handlers use their own guard). Transport layers (httpfence,
// grpcfence) call it once they have parsed and validated the request's
// token and object, and ContextWithIssuer for its issuer.
//
// The fence is kept apart from the one a client sends (WithOutgoingToken),
// so a token received by a handler is never forwarded to another service
// by accident.
func WithFence(ctx context.Context, object string, t fence.Token, g fence.Guard) context.Context {
	return context.WithValue(ctx, servingKey{}, &serving{object: object, token: t, guard: g})
}

// TokenFrom returns the object and token of the fenced request whose
// context is ctx (WithFence); ok is false when the request was not fenced.
// The issuer presented with them, if any, is IssuerFromContext(ctx).
//
// Handlers that write through a guard of their own, not the one the
// middleware or interceptors were configured with, pass them to it:
//
//	object, t, _ := guard.TokenFrom(r.Context())
//	err := pg.InTx(r.Context(), object, t, func(tx pgx.Tx) error { ... })
func TokenFrom(ctx context.Context) (object string, t fence.Token, ok bool) {
	f := servingFrom(ctx)
	if f == nil {
		return "", 0, false
	}
	return f.object, f.token, true
}

// Do runs apply as the handler's protected write, atomically with the
// check of the request's token: it calls the fence.Guard's Do with the
// object and token of TokenFrom(ctx), so the check, apply and the raise of
// the watermark are one step and two requests for the same object cannot
// interleave between check and write. apply must do the whole write and
// nothing outside it that needs fencing, using the context it is given
// (which carries the guard's transaction, if it has one: see the guard's
// documentation); when it returns an error Do returns that error and the
// watermark is not raised (fence.Guard says when a guard may keep it).
//
// Inside apply the check is held: a Do with apply's context calls its apply
// directly instead of waiting for the step it is already in. The HTTP
// middleware and gRPC interceptors in AroundHandler mode run the whole
// handler as the apply of a Do, so a handler behind them may call Do too.
//
// Do returns a *fence.StaleTokenError for a stale token, errors matching
// fence.ErrInvalidToken or fence.ErrIssuerMismatch from the guard (hand
// them to httpfence.WriteError, or return them from a gRPC handler),
// ErrNoFence when ctx is not a fenced request's and ErrNoGuard when the
// request has no fence.Guard.
func Do(ctx context.Context, apply func(ctx context.Context) error) error {
	f := servingFrom(ctx)
	switch {
	case f == nil:
		return ErrNoFence
	case f.held:
		return apply(ctx)
	case f.guard == nil:
		return ErrNoGuard
	}
	return f.guard.Do(ctx, f.object, f.token, func(ctx context.Context) error {
		held := *f
		held.held = true
		return apply(context.WithValue(ctx, servingKey{}, &held))
	})
}
