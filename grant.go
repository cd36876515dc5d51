package fence

import "time"

// Grant is what a holder receives when a lock is granted: the token to send
// with every protected write, the issuer that ordered it, the name (scope)
// it was granted for and the session whose liveness keeps it.
type Grant struct {
	// Name is the lock the grant is for (its scope).
	Name string
	// Token is the fencing token of this grant.
	Token Token
	// Issuer identifies the cluster that issued Token. Tokens of two issuers
	// are not comparable.
	Issuer string
	// Session is the session that holds the grant.
	Session uint64
	// TTL is the session's time to live as the server applies it. It bounds
	// how long the server keeps the grant without a renewal from below; it is
	// not a promise that the grant lasts that long.
	TTL time.Duration
	// IssuedAt is the leader's wall clock when the grant was made; for
	// display only, never for safety decisions.
	IssuedAt time.Time
	// Signed is the grant signed by the cluster, in the wire form of
	// SignedGrant (the X-Fencing-Grant header's value): a resource behind
	// guard.Signed verifies it offline with the cluster's KeySet. Empty
	// when the server signs no grants, and on grants read from Describe,
	// Verify or Revoke, which are not handed to their holder.
	Signed string
}
