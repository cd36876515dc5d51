// Package redisgrant grants fenced locks, semaphore permits and rate-limit
// decisions from one Redis a team already runs: the fence.Grantor of
// library mode on Redis (docs/library-mode-redis.md). Code written against
// fence.Grantor moves to the fenced server by changing the constructor.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
//	g := redisgrant.New(rdb)
//	guard := redisfence.New(rdb) // or the guard of the resource you write
//
//	h, err := g.Acquire(ctx, "orders", fence.Wait(), fence.WithTTL(30*time.Second))
//	if err != nil {
//		return err
//	}
//	defer h.Release(ctx)
//	// Send h.Grant().Token with every write: the guard rejects a token
//	// below one it has seen, so a paused earlier holder is kept out.
//	err = guard.Set(h.Context(), "report", h.Grant().Token, body, 0)
//
// # What it keeps in Redis
//
// A lock of name is two keys with the hash tag {name}, so they are in one
// hash slot and one script can touch both on Redis Cluster: the lease
// (owner, token, grant time; a PEXPIRE of the TTL) and the counter (token,
// issuer; no TTL). Every operation (acquire, release, renew, verify) is one
// Lua script, which Redis runs with no other command in between. Tokens
// are counted by HINCRBY in Redis's 64-bit integers and handed around as
// decimal strings, never as Lua numbers, so they are exact up to
// fence.MaxToken (2^63-1), far above the 2^53 a double holds. The owner
// token, a random secret per grant, proves ownership to release and renew;
// it is not the fencing token and never goes to the resource.
//
// Expiry is decided by Redis's clock (PEXPIRE; TIME for semaphore permits
// and limiters), never by the client's wall clock. The client measures a
// grant's validity on its own monotonic clock from just before the request
// was sent, minus a margin (fence.DefaultMargin): a liveness signal, never
// a safety guarantee.
//
// # Waiting
//
// A waiting Acquire tries once; if the name is held, it subscribes to the
// name's release channel and tries again (so no release in between is
// missed), then sleeps until a release is published there, until the
// holder's TTL (as Redis reported it with the refusal) has run out, or, at
// the latest, until the fallback re-check interval (WithRecheck, default
// DefaultRecheck) has passed; then it looks again. Nothing polls on a short
// timer; the re-check only covers a message lost on the way (pub/sub
// delivers at most once, and not across a reconnect). One Grantor's
// waiters go first come, first served; waiters of different Grantors race.
//
// # What Redis cannot promise
//
// The counter is as durable as Redis's persistence. With appendonly yes
// and appendfsync always on a single node, it survives a kill -9 and a
// restart (tested). Asynchronous replication (a failover to a replica
// that had not received the last grants) and a restore from an older RDB
// or AOF roll it back, and then tokens are issued again with the same
// issuer: a guard cannot tell. Use the fenced server when that matters.
// docs/library-mode-redis.md says this in full, and docs/redlock.md why
// there is no quorum lease over independent Redis nodes.
package redisgrant
