package postgres_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fenced-dev/fenced/internal/testdb"
	"github.com/fenced-dev/fenced/postgres"
)

// pgURL is the connection string of the test binary's PostgreSQL server.
var pgURL string

// TestMain starts a throwaway PostgreSQL server for the package's tests. A
// server that cannot start fails the tests; it never skips them.
func TestMain(m *testing.M) {
	pg, err := testdb.StartPostgres()
	if err != nil {
		fmt.Fprintln(os.Stderr, "postgres tests need a real PostgreSQL:", err)
		os.Exit(1)
	}
	pgURL = pg.URL
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, "set up test tables:", err)
		pg.Stop()
		os.Exit(1)
	}
	code := m.Run()
	pg.Stop()
	os.Exit(code)
}

// setup creates the tables the tests share.
func setup() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if err := postgres.New(conn).Migrate(ctx); err != nil {
		return err
	}
	_, err = conn.Exec(ctx, `
CREATE TABLE guard_values (object text PRIMARY KEY, value text NOT NULL);
CREATE TABLE docs (id text PRIMARY KEY, value text NOT NULL DEFAULT '', fencing_token bigint);
CREATE TABLE kv (id text PRIMARY KEY, value text, fencing_token bigint);
CREATE TABLE accounts (id bigint PRIMARY KEY, owner text NOT NULL, balance bigint NOT NULL,
	version bigint NOT NULL DEFAULT 1, fencing_token bigint);
CREATE TABLE counters (name text PRIMARY KEY, n bigint NOT NULL);
`)
	return err
}

// newPool returns a pool on the test server, closed when t ends.
func newPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var nameSeq atomic.Int64

// uniqueName returns a name unique in this test binary's run.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano(), nameSeq.Add(1))
}
