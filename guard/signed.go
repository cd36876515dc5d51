package guard

import (
	"context"
	"fmt"

	fence "github.com/fenced-dev/fenced"
)

// grantKey is the context key of the presented signed grant.
type grantKey struct{}

// ContextWithGrant returns a context that presents the signed grant
// encoded (fence.SignedGrant's wire form) with the request's token, for a
// Signed guard. The HTTP and gRPC middleware set it from the
// X-Fencing-Grant header or x-fencing-grant metadata.
func ContextWithGrant(ctx context.Context, encoded string) context.Context {
	return context.WithValue(ctx, grantKey{}, encoded)
}

// GrantFromContext returns the signed grant presented in ctx, or "".
func GrantFromContext(ctx context.Context) string {
	s, _ := ctx.Value(grantKey{}).(string)
	return s
}

// SignedGuard is a fence.Guard that accepts a token only with a signed
// grant for it (Signed).
type SignedGuard struct {
	inner fence.Guard
	keys  fence.GrantVerifier
}

var _ fence.Guard = (*SignedGuard)(nil)

// Signed returns a guard that checks, offline and before inner's watermark
// rule, the signed grant presented with each token (ContextWithGrant): it
// must verify with keys (the issuer's, a key it publishes, a signature
// that holds), be for the token presented, and be for a scope that covers
// the object written (fence.ScopeCovers), and not be a read grant of a
// read/write lock (kind read: authority for reading only, while a guard
// admits writes); an issuer presented beside it
// (X-Fencing-Issuer) must be the grant's. Otherwise Do returns an error
// matching fence.ErrInvalidGrant that says which check failed, calls
// neither inner nor apply, and so changes nothing. When the grant is good
// it calls inner.Do with a context presenting the grant's issuer, so an
// inner guard pinned to the issuer (CheckIssuer) sees it.
//
// The signed grant binds the token to its scope: the holder of lock "b",
// or anyone who read a token number, cannot write object "a" with it.
// It does not make a token current: inner's watermark still refuses a
// stale one. Load keys from the cluster (client.SigningKeys,
// fence.LoadKeySet on GET /.well-known/fenced-keys) and again after a
// rotation.
func Signed(inner fence.Guard, keys fence.GrantVerifier) *SignedGuard {
	return &SignedGuard{inner: inner, keys: keys}
}

// Do implements fence.Guard.
func (g *SignedGuard) Do(ctx context.Context, object string, t fence.Token, apply func(ctx context.Context) error) error {
	sg, err := g.Check(ctx, object, t)
	if err != nil {
		return err
	}
	return g.inner.Do(ContextWithIssuer(ctx, sg.Issuer), object, t, apply)
}

// Check verifies the signed grant presented in ctx for token t and object
// as Do does, without inner's watermark rule, and returns the grant.
func (g *SignedGuard) Check(ctx context.Context, object string, t fence.Token) (fence.SignedGrant, error) {
	if err := fence.ValidateToken(t); err != nil {
		return fence.SignedGrant{}, err
	}
	encoded := GrantFromContext(ctx)
	if encoded == "" {
		return fence.SignedGrant{}, fmt.Errorf("%w: this resource accepts a token only with its signed grant and none was presented; send the grant's Signed value as X-Fencing-Grant (x-fencing-grant in gRPC)", fence.ErrInvalidGrant)
	}
	sg, err := g.keys.VerifyGrant(encoded)
	if err != nil {
		return fence.SignedGrant{}, err
	}
	if sg.Token != t {
		return fence.SignedGrant{}, fmt.Errorf("%w: the signed grant is for token %d, the request presented token %d", fence.ErrInvalidGrant, sg.Token, t)
	}
	if !fence.ScopeCovers(sg.Scope, object) {
		return fence.SignedGrant{}, fmt.Errorf("%w: token %d was granted for %s %q, which does not cover object %q", fence.ErrInvalidGrant, t, sg.Kind, sg.Scope, object)
	}
	if sg.Kind == fence.KindRead {
		return fence.SignedGrant{}, fmt.Errorf("%w: token %d was granted for read %q, which is authority for reading only; a guarded write needs a write or lock grant", fence.ErrInvalidGrant, t, sg.Scope)
	}
	if iss := IssuerFromContext(ctx); iss != "" && iss != sg.Issuer {
		return fence.SignedGrant{}, fmt.Errorf("%w: %w: the request presents issuer %q, its signed grant issuer %q", fence.ErrInvalidGrant, fence.ErrIssuerMismatch, iss, sg.Issuer)
	}
	return sg, nil
}
