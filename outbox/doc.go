// Package outbox is the resource kit's answer for side effects that cannot
// check a fencing token: an e-mail, a payment API, an actuator, any
// service that is not fenced itself (docs/design.md §1). Fencing cannot be
// granted to such a target, because the target never compares tokens. This
// package narrows the window instead, on PostgreSQL (pgx v5), with two
// tools. Neither is fencing, and the documentation below says exactly what
// each one guarantees.
//
// # The local guard and the idempotency key
//
// Guard.Before checks the caller's token against the resource's watermark
// and raises the watermark, in a committed transaction, before the call,
// and returns the idempotency key "resource:token" (IdempotencyKey) to send
// with it:
//
//	g := outbox.NewGuard(pool)
//	key, err := g.Before(ctx, "invoice-42/charge", grant.Token)
//	if err != nil {
//		return err // stale (fence.ErrStaleToken): a newer holder has acted
//	}
//	_, err = payments.Charge(ctx, invoice, payments.IdempotencyKey(key))
//
// Once a token has passed Before, no lower token passes it again. But the
// payment API never sees the check: a holder that passed Before and then
// paused can still reach it after a newer holder did. The key makes
// retries of one side effect safe at a receiver that deduplicates on it;
// it does not stop a stale holder.
//
// # The transactional outbox
//
// A worker does not call the target. It enqueues a command, with its
// token, in the same transaction as its state change, ideally inside its
// own fenced transaction, so that a stale worker enqueues nothing:
//
//	err := g.InTx(ctx, "order-7", grant.Token, func(tx pgx.Tx) error { // g is a postgres.Guard
//		if _, err := tx.Exec(ctx, "UPDATE orders SET status = 'shipped' WHERE id = 7"); err != nil {
//			return err
//		}
//		_, err := outbox.Enqueue(ctx, tx, outbox.Command{
//			Resource: "order-7/shipping-email", Token: grant.Token, Payload: body,
//		})
//		return err
//	})
//
// Guard.Do does the same with the outbox's own watermarks: the function it
// runs takes the fenced transaction from postgres.TxFromContext, and a
// Guard behind the httpfence middleware lets a fenced HTTP handler enqueue.
//
// One dispatcher per database delivers the commands:
//
//	conn, err := pgx.Connect(ctx, url) // a dedicated connection: it holds the lock
//	d := &outbox.Dispatcher{Deliver: func(ctx context.Context, d outbox.Delivery) error {
//		return mailer.Send(ctx, d.Payload, mailer.IdempotencyKey(d.Key))
//	}}
//	err = d.Run(ctx, conn)
//
// Run migrates nothing: run Migrate, or MigrationSQL, first.
//
// # What the outbox guarantees
//
//   - A command exists if and only if the worker's transaction commits.
//   - One dispatcher: it holds a session-level advisory lock
//     (AdvisoryLockKey) on its connection and runs every statement on that
//     connection; a second one gets ErrAlreadyRunning. If the connection is
//     lost, PostgreSQL releases the lock and the dispatcher stops at its
//     next statement. A paused dispatcher (SIGSTOP, a long GC) keeps the
//     lock, and delivery stalls, until PostgreSQL notices its connection is
//     gone (TCP keepalives); that costs liveness, not order.
//   - Order: commands are delivered one at a time in id order. Enqueue
//     makes the transactions that enqueue for one resource commit one after
//     the other, so a resource's commands are delivered in the order their
//     transactions committed. Commands of different resources from
//     concurrent transactions may be delivered in either order. A command
//     whose delivery keeps failing holds up every later command; return
//     Permanent(err) for errors no retry can heal.
//   - Stale commands are dropped, never delivered: a command whose token is
//     below its resource's watermark is marked dropped, with the presented
//     and required token as the reason (Lookup shows it). The watermark is
//     raised before each call and again, to at least the command's token,
//     in the transaction that marks the command delivered.
//   - Retries: a failed delivery is retried with exponential backoff, with
//     the same idempotency key.
//   - Crashes: a command is marked delivered after Deliver returns nil. If
//     the dispatcher dies (crash, kill -9, lost connection) after the
//     receiver acted and before that mark commits, or if Deliver returns an
//     error although the receiver acted (a timeout), the outbox cannot know
//     the call succeeded: the next attempt repeats it with the same key and
//     a higher Delivery.Attempt. No other command is delivered twice.
//
// Delivery is therefore at least once. Exactly once depends on the
// receiver honouring the idempotency key: a receiver that ignores it may
// apply a repeated command twice. Two further limits: a call still in
// flight from a dispatcher that lost its connection can reach the receiver
// after the next dispatcher's calls; and the key "resource:token" names one
// side effect per resource and token, so give distinct side effects of one
// grant distinct resources.
package outbox
