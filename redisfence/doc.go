// Package redisfence makes fenced writes to Redis: SET, HSET, DEL and any
// Lua script of the caller's, each accepted only when its fencing token is
// not below the highest token the key has accepted (docs/design.md §5).
//
// Each write is one Lua script (run with EVALSHA, cached by the server) that
// reads the key's watermark, rejects a stale token with a
// *fence.StaleTokenError carrying the presented and the required token,
// applies the write and raises the watermark. Redis runs a script with no
// other command in between, so the check, the write and the raise are one
// atomic step, the condition docs/design.md §1 puts on every fenced resource.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
//	g := redisfence.New(rdb)
//
//	err := g.Set(ctx, "report:latest", grant.Token, body, 0)
//	var stale *fence.StaleTokenError
//	if errors.As(err, &stale) {
//		// A writer with token stale.Required or later has written:
//		// this process lost its lock and must stop.
//	}
//
// Readers need nothing: GET, HGET and the rest read the keys as usual.
//
// # Watermarks
//
// The watermark of key K is a string key next to it, WatermarkKey(K): for
// "orders" it is "{orders}:fencing-token:orders", for "{user:1}:cart" it is
// "{user:1}:fencing-token:{user:1}:cart". Its hash tag puts it in K's hash
// slot, and every script declares both keys in KEYS, so the scripts work
// unchanged on Redis Cluster (a *redis.ClusterClient routes them by K). An
// unknown key has no watermark and accepts any valid token.
//
// Watermark keys have no TTL and survive Del: a writer that was paused
// longer than a key's TTL, or across its deletion, must still be rejected,
// so the key cannot be recreated by a stale writer. Their cost is one small
// string per key ever fenced; delete one (by hand) only when no writer with
// an older token can still be running. Configure a maxmemory-policy that
// never evicts keys without a TTL (noeviction or a volatile-* policy): an
// evicted watermark would let stale writers in.
//
// A watermark is exactly as durable as the key it protects: both are
// written by one script, so a snapshot, the AOF and replicas see both or
// neither. Redis replication is asynchronous, not consensus: a failover (or
// a restart without persistence) can lose the last acknowledged writes
// together with their watermark, and a stale writer may then be accepted by
// the new primary. Fencing holds for the history the serving primary has;
// narrow the gap with WAIT or WAITAOF after writes and
// min-replicas-to-write.
//
// # Your own commands: Do
//
// Guard is a fence.Guard. Its Do runs the commands a function queues on
// the Pipeliner of PipelinerFromContext in a MULTI/EXEC transaction, after
// reading the watermark under WATCH, and raises the watermark in the same
// transaction; if the watermark moved in between, it checks again and
// resends the same commands. The httpfence middleware and the grpcfence
// interceptors take a Guard directly:
//
//	mw, _ := httpfence.New(httpfence.Config{Guard: g})
//	// in the handler:
//	err := guard.Do(r.Context(), func(ctx context.Context) error {
//		pipe, _ := redisfence.PipelinerFromContext(ctx)
//		pipe.Set(ctx, "report:latest", body, 0)
//		pipe.RPush(ctx, "{report:latest}:history", body) // same hash slot
//		return nil
//	})
//
// The queued commands cannot depend on what they read (replies arrive
// after EXEC): a read-modify-write belongs in a Script. See Guard.Do for
// what is atomic and what Redis does not roll back.
//
// # Scripts
//
// NewScript and Eval wrap a caller's Lua source into the fenced script: the
// token check and the raise run first, then the source as a function body
// with KEYS[1] the protected key, the extra keys after it and the caller's
// ARGV. See Script for the constraints.
//
// # Errors
//
// A token outside 1..fence.MaxToken fails with an error matching
// fence.ErrInvalidToken, a token from another cluster (with WithIssuer) with
// fence.ErrIssuerMismatch, both before Redis is asked; a stale token with a
// *fence.StaleTokenError. None of them changes anything. A watermark key
// written by someone else makes every write fail with ErrCorruptWatermark.
package redisfence
