package guard

import (
	"context"

	fence "github.com/fenced-dev/fenced"
)

// Outgoing is the fence a client presents with its requests: what
// WithOutgoingToken and WithOutgoingIssuer put into a context, for the
// client side of a transport (httpfence.Transport, grpcfence's client
// interceptors) to send.
type Outgoing struct {
	// Object is the protected object the requests write; "" lets the
	// server derive it from the request.
	Object string
	// Token is the fencing token of the caller's grant.
	Token fence.Token
	// Issuer is the issuer (cluster id, the Issuer of a fence.Grant) of
	// Token, for resources pinned to one issuer; "" sends none.
	Issuer string
	// Grant is the signed grant of Token (fence.Grant's Signed), for
	// resources behind Signed; "" sends none.
	Grant string
}

type outgoingKey struct{}

// OutgoingFromContext returns the fence that requests made with ctx
// present; ok is false when ctx carries no token (an issuer alone is not
// sent).
//
// It is kept apart from the fence of a request being served (WithFence,
// TokenFrom), so a token received by a handler is never forwarded to
// another service by accident.
func OutgoingFromContext(ctx context.Context) (o Outgoing, ok bool) {
	o, _ = ctx.Value(outgoingKey{}).(Outgoing)
	return o, o.Token != 0
}

// WithOutgoingToken returns a context whose fenced requests carry token t
// for object, whatever transport sends them. A later WithOutgoingToken
// replaces an earlier one and drops the signed grant of a WithOutgoingGrant
// (it was another token's); an issuer set by WithOutgoingIssuer is kept.
func WithOutgoingToken(ctx context.Context, object string, t fence.Token) context.Context {
	o, _ := OutgoingFromContext(ctx)
	o.Object, o.Token, o.Grant = object, t, ""
	return context.WithValue(ctx, outgoingKey{}, o)
}

// WithOutgoingGrant returns a context whose fenced requests carry the
// grant g for object: its token, its issuer and its signed grant
// (g.Signed, sent as X-Fencing-Grant or x-fencing-grant when not empty),
// which resources behind Signed require. It is the one call a holder
// needs:
//
//	ctx = guard.WithOutgoingGrant(ctx, "orders/17", mu.Grant())
func WithOutgoingGrant(ctx context.Context, object string, g fence.Grant) context.Context {
	o := Outgoing{Object: object, Token: g.Token, Issuer: g.Issuer, Grant: g.Signed}
	return context.WithValue(ctx, outgoingKey{}, o)
}

// WithOutgoingIssuer returns a context whose fenced requests also carry
// issuer, the issuer of their token, for resources pinned to one issuer. It
// is the client's counterpart of ContextWithIssuer, which a server sets
// from the issuer a request presented.
func WithOutgoingIssuer(ctx context.Context, issuer string) context.Context {
	o, _ := OutgoingFromContext(ctx)
	o.Issuer = issuer
	return context.WithValue(ctx, outgoingKey{}, o)
}
