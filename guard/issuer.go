package guard

import (
	"context"
	"fmt"

	fence "github.com/fenced-dev/fenced"
)

// issuerKey is the context key of the presented issuer.
type issuerKey struct{}

// ContextWithIssuer returns a context that presents issuer (the cluster
// that granted the caller's token) to guards pinned to an issuer. The HTTP
// and gRPC middleware set it from the X-Fencing-Issuer header or metadata.
func ContextWithIssuer(ctx context.Context, issuer string) context.Context {
	return context.WithValue(ctx, issuerKey{}, issuer)
}

// IssuerFromContext returns the issuer presented in ctx, or "".
func IssuerFromContext(ctx context.Context) string {
	s, _ := ctx.Value(issuerKey{}).(string)
	return s
}

// pinnedRoot is the root of a pinned issuer's epochs (fence.IssuerEpoch).
func pinnedRoot(pinned string) string {
	root, _ := fence.IssuerEpoch(pinned)
	return root
}

// CheckIssuer enforces issuer pinning: when pinned is not empty, the issuer
// presented in ctx must equal it. Tokens of two clusters are not comparable,
// so a token from another cluster, or one whose issuer is not presented, is
// rejected with an error matching fence.ErrIssuerMismatch; a token of
// another epoch of the pinned cluster (a restore, fence.IssuerEpoch) is
// rejected too, with an error that says so. With pinned empty
// every issuer is accepted.
func CheckIssuer(ctx context.Context, pinned string) error {
	if pinned == "" {
		return nil
	}
	switch got := IssuerFromContext(ctx); got {
	case pinned:
		return nil
	case "":
		return fmt.Errorf("%w: this resource accepts only tokens of issuer %q and none was presented", fence.ErrIssuerMismatch, pinned)
	default:
		if root, epoch := fence.IssuerEpoch(got); root == pinnedRoot(pinned) {
			// A restore of the pinned cluster (or the cluster it was
			// restored from): its tokens are not comparable with the
			// pinned issuer's.
			return fmt.Errorf("%w: token issued by %q, epoch %d of the cluster %q this resource is pinned to as %q: that cluster was restored from a snapshot and its tokens are not comparable with the pinned issuer's; re-pin this resource to %q once its operator has checked the restore's token floor (docs/operations.md, \"Restore\")", fence.ErrIssuerMismatch, got, epoch, root, pinned, got)
		}
		return fmt.Errorf("%w: token issued by %q, this resource accepts only tokens of issuer %q", fence.ErrIssuerMismatch, got, pinned)
	}
}
