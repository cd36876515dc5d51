// Package postgres makes PostgreSQL a fenced resource: writes carry a
// fencing token and a write whose token is below the object's watermark is
// rejected atomically with the write, in the same statement or transaction
// (docs/design.md §5). It uses pgx v5.
//
// Three tools, for three shapes of data:
//
//   - Guard.Do and Guard.InTx, a fenced transaction: the watermarks live in
//     a table of their own (MigrationSQL, one row per object) and any
//     statements run in the transaction that checks and raises the
//     object's watermark. Guard is a fence.Guard, so the httpfence
//     middleware and the grpcfence interceptors take it directly.
//   - Update and Upsert, a single fenced statement for a row that carries
//     its own token in a column (DefaultTokenColumn, "fencing_token").
//   - UpdateVersioned, the same single statement combined with a version
//     guard (optimistic concurrency): both conditions in one WHERE clause.
//
// # The rule
//
// For each object: a token below the watermark is rejected with a
// *fence.StaleTokenError carrying the presented and the required token; an
// equal token is accepted (repeated writes within one grant); a higher token
// is accepted and becomes the watermark. A token of 0 or above
// fence.MaxToken is refused with an error matching fence.ErrInvalidToken
// before anything is sent. An object never written has no watermark. With
// WithIssuer (Guard) or FencedUpdate.Issuer, a token whose issuer the
// context does not present (guard.ContextWithIssuer) is refused with an
// error matching fence.ErrIssuerMismatch.
//
// # Fenced transactions
//
//	pool, _ := pgxpool.New(ctx, url)
//	g := postgres.New(pool)
//	if err := g.Migrate(ctx); err != nil { ... } // or run postgres.MigrationSQL yourself
//
//	err := g.InTx(ctx, "invoice/42", grant.Token, func(tx pgx.Tx) error {
//		_, err := tx.Exec(ctx, "UPDATE invoices SET status = 'paid' WHERE id = 42")
//		return err
//	})
//	if errors.Is(err, fence.ErrStaleToken) {
//		// Another holder has written invoice/42 with a newer token:
//		// this process lost its lock. Stop, do not retry.
//	}
//
// Behind the HTTP middleware (or the gRPC interceptors) the handler's write
// runs in the same transaction, which it takes from its context:
//
//	mw, _ := httpfence.New(httpfence.Config{Guard: g})
//	// in the handler:
//	err := guard.Do(r.Context(), func(ctx context.Context) error {
//		tx, _ := postgres.TxFromContext(ctx)
//		_, err := tx.Exec(ctx, "UPDATE invoices SET status = 'paid' WHERE id = 42")
//		return err
//	})
//
// Do (and so InTx, Check and the middleware's step) begins a transaction,
// runs
//
//	INSERT INTO fence_watermarks AS w (object, token) VALUES ($1, $2)
//	ON CONFLICT (object) DO UPDATE SET token = EXCLUDED.token
//	WHERE w.token <= EXCLUDED.token RETURNING w.token
//
// then the caller's function, then COMMIT. The upsert works on the latest
// committed version of the object's row, never on a stale snapshot, and
// keeps the row locked until the transaction ends, so under READ COMMITTED
// the fenced transactions of one object are serialised: check, raise and
// writes commit together, and a failing function rolls all of them back
// (the watermark is not raised).
//
// # Rows that carry their own token
//
//	err := postgres.Update(ctx, pool, postgres.FencedUpdate{
//		Table: "documents", KeyColumn: "id", Key: 7,
//		Set: map[string]any{"body": body},
//	}, grant.Token)
//
// runs one statement, UPDATE "documents" SET "body" = $1, "fencing_token"
// = $2 WHERE "id" = $3 AND ("fencing_token" IS NULL OR "fencing_token" <=
// $2). When it matches no row, Update reads the row back to tell a missing
// row (ErrNotFound) from a stale token (*fence.StaleTokenError with the
// row's token as Required). Identifiers are quoted with
// pgx.Identifier.Sanitize and values are parameters, so neither can inject
// SQL; SetSQL, for assignments computed from the row, is raw SQL and must
// come from code, not input.
//
// With a version column:
//
//	v, err := postgres.UpdateVersioned(ctx, pool, postgres.VersionedUpdate{
//		FencedUpdate: postgres.FencedUpdate{Table: "accounts", KeyColumn: "id", Key: 7,
//			SetSQL: `"balance" = "balance" - $1`, SetArgs: []any{10}},
//		Expected: readVersion,
//	}, grant.Token)
//	var vm *fence.VersionMismatchError
//	if errors.As(err, &vm) {
//		// someone else updated the row: re-read it (vm.Current) and retry
//	}
//
// A stale token takes precedence over a version mismatch: a writer that
// lost its grant must stop, not retry.
//
// # What this protects
//
// Only writes made through these functions (or that follow the same rule)
// are fenced. A write that bypasses them, or a mutation outside PostgreSQL
// made under the same grant, is not. For side effects outside the
// database, see package outbox.
package postgres
