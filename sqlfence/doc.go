// Package sqlfence runs fenced transactions on any database/sql database:
// PostgreSQL (through github.com/jackc/pgx/v5/stdlib or lib/pq) and SQLite
// (modernc.org/sqlite or mattn/go-sqlite3). It is the database/sql twin of
// package postgres's Guard, with the same table, for programs that use
// *sql.DB.
//
// The rule (docs/design.md §5), per object: a token below the watermark is
// rejected with a *fence.StaleTokenError carrying the presented and the
// required token; an equal or higher token is accepted and becomes the
// watermark, atomically with the caller's writes. Tokens of 0 or above
// fence.MaxToken are refused with an error matching fence.ErrInvalidToken
// before anything is sent; WithIssuer pins the guard to one issuer.
//
// # Usage
//
//	db, err := sql.Open("sqlite", "file:app.db?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
//	...
//	g, err := sqlfence.New(db) // the dialect is detected from the driver
//	if err != nil { ... }
//	if err := g.Migrate(ctx); err != nil { ... }
//
//	err = g.InTx(ctx, "report/daily", grant.Token, func(tx *sql.Tx) error {
//		_, err := tx.ExecContext(ctx, "UPDATE reports SET body = ? WHERE name = 'daily'", body)
//		return err
//	})
//	if errors.Is(err, fence.ErrStaleToken) {
//		// a newer holder has written: this process lost its lock
//	}
//
// Guard is a fence.Guard: Do runs a function in the same fenced
// transaction, which it takes from its context with TxFromContext, and the
// httpfence middleware and grpcfence interceptors take the Guard directly:
//
//	mw, _ := httpfence.New(httpfence.Config{Guard: g})
//	// in the handler:
//	err := guard.Do(r.Context(), func(ctx context.Context) error {
//		tx, _ := sqlfence.TxFromContext(ctx)
//		_, err := tx.ExecContext(ctx, "UPDATE reports SET body = ? WHERE name = 'daily'", body)
//		return err
//	})
//
// # How the check is made atomic
//
// Do (and so InTx, Check and the middleware's step) begins a transaction
// whose first statement is
//
//	INSERT INTO fence_watermarks AS w (object, token) VALUES (?, ?)
//	ON CONFLICT (object) DO UPDATE SET token = excluded.token
//	WHERE w.token <= excluded.token RETURNING token
//
// and then runs the caller's function and commits. On PostgreSQL, under
// READ COMMITTED, the upsert acts on the latest committed version of the
// object's row and keeps it locked until commit, so the transactions of one
// object run one after the other. On SQLite, a write as the first statement
// makes the transaction take the database's write lock before it has read
// anything, the effect of BEGIN IMMEDIATE: it waits (busy timeout) for the
// writer ahead of it, then sees the latest commit, and no other writer can
// commit until it ends. A transaction that read first and wrote later would
// instead fail with SQLITE_BUSY when another writer committed in between.
// Open SQLite with a busy timeout; without one, concurrent fenced
// transactions fail at once with SQLITE_BUSY instead of waiting (safe, but
// noisy). "_txlock=immediate" (modernc.org/sqlite, go-sqlite3) is not
// needed, and harmless.
//
// The dialect decides the placeholders ($1 or ?), the migration
// (PostgresMigrationSQL, SQLiteMigrationSQL) and the timestamp function.
// Detect recognises the common drivers; WithDialect names it explicitly.
package sqlfence
