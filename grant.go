package fence

import "time"

// Kind is the kind of grant a primitive issues: what its token is
// authority for. Every grant carries one with its Scope.
type Kind string

// The kinds of grant.
const (
	// KindLock is the exclusive lock's grant; its scope is the lock's name.
	KindLock Kind = "lock"
	// KindRead is a read/write lock's shared (read) grant; its scope is the
	// lock's name.
	KindRead Kind = "read"
	// KindWrite is a read/write lock's exclusive (write) grant; its scope is
	// the lock's name.
	KindWrite Kind = "write"
	// KindPermit is a semaphore permit; its scope is "name/slot".
	KindPermit Kind = "permit"
	// KindLeader is an election's leadership (term) grant; its scope is the
	// election's name.
	KindLeader Kind = "leader"
	// KindClaim is a queue item claim; its scope is "queue/item".
	KindClaim Kind = "claim"
)

// Grant is what a holder receives when a primitive grants it something:
// the token to send with every protected write, the issuer that ordered
// it, the kind and scope it was granted for and the session whose
// liveness keeps it.
type Grant struct {
	// Name is the primitive's object the grant is for (the lock's,
	// semaphore's or election's name).
	Name string
	// Kind is what the grant is (KindLock for the exclusive lock). Empty
	// from a server that predates kinds: read it as KindLock.
	Kind Kind
	// Scope is what the token is authority for: the name for a lock,
	// read/write lock or election, "name/slot" for a permit, "queue/item"
	// for a claim. ScopeCovers says which objects it covers. Empty from a
	// server that predates scopes: read it as Name.
	Scope string
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
