// Package pggrant issues fenced locks and work-queue claims from a
// PostgreSQL database a team already runs: a fence.Grantor with the same
// interface as the fenced server's client.Grantor, so that an application
// moves to the server by changing its constructor alone (see
// docs/library-mode.md).
//
//	if err := pggrant.Migrate(ctx, pool); err != nil { ... } // once, or apply Migrations
//	g, err := pggrant.New(ctx, pool)
//	h, err := g.Acquire(ctx, "orders/42", fence.Wait())
//	defer h.Release(ctx)
//	// every write to the resource carries h.Grant().Token, checked by a guard
//
// # The table
//
// fence_lock_grants has one row per name: holder (a random id per grant,
// NULL when free), fencing_token, granted_at and expires_at. A grant is
// one INSERT ... ON CONFLICT DO UPDATE that takes the row if it is free or
// its expires_at has passed and raises fencing_token by one; a renewal is
// one UPDATE that moves expires_at if the row still names the holder and
// token and has not expired; a release is one UPDATE that clears holder
// (keeping fencing_token) and notifies the waiters. Every time comparison
// uses the database's clock (now()), never the client's. The counter lives
// as long as the row: releases and expiry keep it, pggrant never deletes a
// row, and no migration drops or resets it.
//
// # Waiting
//
// A waiter (fence.Wait) tries once, then sleeps until the release is
// notified on the LISTEN/NOTIFY channel "fence_lock_grants" (one
// listening connection per Grantor), until the current grant's expires_at
// (a grant that runs out sends no notification), or until the fallback
// re-check interval passes (WithRecheck, default DefaultRecheck, 10s), and
// tries again. The re-check only bounds a wait whose notification was lost
// (the listening connection was down); it is not a poll loop. The
// waiters of one Grantor take turns in arrival order, and only the first
// of them queries; waiters of different Grantors race (the server queues
// every waiter FIFO). A try that finds the name held takes no row lock
// and writes nothing. A release by a holder of the same Grantor as the
// first waiter hands the lock to that waiter in the release's statement
// (one commit, the next token), at most WithMaxHandoffs times in a row
// (default DefaultMaxHandoffs) before an ordinary release lets the
// waiters of other Grantors race for it.
//
// # What PostgreSQL can and cannot promise
//
// Tokens of one name rise strictly as long as the row's committed history
// does: across releases, expiry, a restart and crash recovery of the
// database (with fsync and synchronous_commit on, the defaults: a
// commit a crash can lose can hand a token out twice). They can go back
// if the history goes back: a restore from a backup older than the last
// grant, a failover to an asynchronous replica that had not received the
// last grant, or a row deleted by hand. After such an event, raise every
// row's fencing_token above any token clients may hold before granting
// again.
//
// Mutual exclusion is as good as the TTL: the database ends a grant when
// its expires_at passes, whether or not its holder has stopped. A holder
// paused (GC, SIGSTOP, a slow disk) past its TTL can still act, believing
// it holds the lock. Its validity (ValidUntil, measured on its monotonic
// clock from before the request that granted or last renewed it, minus a
// margin) and the cancellation of its Context are liveness signals, not a
// guarantee. What keeps a late write out is the token check at the
// resource: a guard (package postgres, sqlfence, redisfence, ...) that
// rejects a token below the highest it has accepted, atomically with the
// write.
//
// # Work claims
//
// Queue keeps a work queue in fence_work_claims: Claim takes the oldest
// ready item with SELECT ... FOR UPDATE SKIP LOCKED and raises its
// claim_token (the item's fencing token, scope "queue/item"); Ack, Nack and
// Extend need the current claim; an expired claim returns the item to the
// queue with a higher token at its next claim; an item delivered
// MaxDeliveries times without an Ack becomes a dead letter.
//
// # Schema
//
// Migrate applies the SQL files of Migrations (also in the source tree
// under pggrant/migrations) that the database lacks, in order, in one
// transaction. Open and New refuse a database whose schema is missing,
// older or newer than SchemaVersion with ErrSchema, naming the migrations
// to run, and write nothing.
package pggrant
