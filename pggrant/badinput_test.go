package pggrant_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/pggrant"
)

// newDatabase creates an empty database on the test server and returns
// its connection string.
func newDatabase(t *testing.T) string {
	t.Helper()
	ctx := testCtx(t)
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	db := fmt.Sprintf("pggrant_%d", time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	return strings.Replace(pg.URL, "/postgres?", "/"+db+"?", 1)
}

// tables lists the tables of the database at dsn.
func tables(t *testing.T, dsn string) []string {
	t.Helper()
	ctx := testCtx(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, _ := conn.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1`)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// A DSN that does not parse or does not connect is a clear error.
func TestOpen_BadDSN(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := pggrant.Open(ctx, "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2")
	if err == nil || !strings.Contains(err.Error(), "pggrant: connect to 127.0.0.1:1") {
		t.Fatalf("Open on a port nothing listens on = %v; want an error naming the address", err)
	}
	if _, err := pggrant.Open(ctx, "postgres://%zz"); err == nil || !strings.Contains(err.Error(), "parse the connection string") {
		t.Fatalf("Open with a malformed DSN = %v; want a parse error", err)
	}
}

// A database without the schema, or with an older one, is refused by
// name of the migrations to run, and nothing is written; Migrate then
// brings it up without touching the counters already there.
func TestOpen_Schema(t *testing.T) {
	ctx := testCtx(t)
	empty := newDatabase(t)
	_, err := pggrant.Open(ctx, empty)
	if !errors.Is(err, pggrant.ErrSchema) || !strings.Contains(err.Error(), "schema is missing: run pggrant.Migrate") ||
		!strings.Contains(err.Error(), "001_lock_grants.sql, 002_work_claims.sql") {
		t.Fatalf("Open on an empty database = %v; want ErrSchema naming both migrations", err)
	}
	if got := tables(t, empty); len(got) != 0 {
		t.Fatalf("tables after a refused Open: %v; want none", got)
	}

	// Version 1 only, applied from the SQL file as a migration tool would.
	old := newDatabase(t)
	conn, err := pgx.Connect(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	sql, err := pggrant.Migrations.ReadFile("migrations/001_lock_grants.sql")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, string(sql)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO fence_lock_grants VALUES ('kept', NULL, 41, now(), now())`); err != nil {
		t.Fatal(err)
	}
	_, err = pggrant.Open(ctx, old)
	if !errors.Is(err, pggrant.ErrSchema) || !strings.Contains(err.Error(), "at version 1, older than 2") ||
		!strings.Contains(err.Error(), "apply 002_work_claims.sql") {
		t.Fatalf("Open on a version 1 schema = %v; want ErrSchema naming 002_work_claims.sql", err)
	}
	if got := tables(t, old); strings.Join(got, ",") != "fence_grantor_schema,fence_lock_grants" {
		t.Fatalf("tables after a refused Open: %v", got)
	}
	pool, err := pgxpool.New(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for range 2 { // idempotent
		if err := pggrant.Migrate(ctx, pool); err != nil {
			t.Fatal(err)
		}
	}
	g, err := pggrant.New(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	h, err := g.Acquire(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	if h.Grant().Token != 42 {
		t.Fatalf("token after the migration = %d; want 42 (the counter kept)", h.Grant().Token)
	}
	if max, err := g.MaxToken(ctx); err != nil || max != 42 {
		t.Fatalf("MaxToken = %d, %v; want 42", max, err)
	}
	h.Release(ctx)

	// A schema newer than the program's is refused too, by Migrate as well.
	if _, err := pool.Exec(ctx, `UPDATE fence_grantor_schema SET version = 99`); err != nil {
		t.Fatal(err)
	}
	if _, err := pggrant.New(ctx, pool); !errors.Is(err, pggrant.ErrSchema) || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("New on a newer schema = %v; want ErrSchema saying newer", err)
	}
	if err := pggrant.Migrate(ctx, pool); !errors.Is(err, pggrant.ErrSchema) {
		t.Fatalf("Migrate on a newer schema = %v; want ErrSchema", err)
	}
}

// A TTL or re-check out of range is refused before anything is written.
func TestAcquire_BadInput(t *testing.T) {
	ctx := testCtx(t)
	g := open(t, pgAddr())
	name := fmt.Sprintf("bad-%d", time.Now().UnixNano())
	for _, ttl := range []time.Duration{0, 99 * time.Millisecond, fence.MaxTTL + time.Second} {
		if _, err := g.Acquire(ctx, name, fence.WithTTL(ttl)); !errors.Is(err, fence.ErrInvalidArgument) {
			t.Errorf("Acquire with ttl %v = %v; want fence.ErrInvalidArgument", ttl, err)
		}
	}
	if _, err := g.Acquire(ctx, "bad\x00name"); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Errorf("Acquire of an invalid name = %v; want fence.ErrInvalidArgument", err)
	}
	var n int
	if err := pgxPool(t).QueryRow(ctx, `SELECT count(*) FROM fence_lock_grants WHERE name = $1`, name).Scan(&n); err != nil || n != 0 {
		t.Fatalf("rows for %q after refused acquires: %d, %v; want 0", name, n, err)
	}
	for _, d := range []time.Duration{time.Millisecond, time.Hour} {
		if _, err := pggrant.Open(ctx, pg.URL, pggrant.WithRecheck(d)); !errors.Is(err, fence.ErrInvalidArgument) {
			t.Errorf("Open with recheck %v = %v; want fence.ErrInvalidArgument", d, err)
		}
	}
}

func pgxPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(testCtx(t), pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// A name whose counter reached fence.MaxToken is refused with
// ErrTokenOverflow, and the row is unchanged.
func TestAcquire_TokenOverflow(t *testing.T) {
	ctx := testCtx(t)
	// A database of its own: its MaxToken would be every other test's.
	dsn := newDatabase(t)
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := pggrant.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("overflow-%d", time.Now().UnixNano())
	if _, err := pool.Exec(ctx, `INSERT INTO fence_lock_grants VALUES ($1, NULL, $2, now(), now())`, name, int64(fence.MaxToken)); err != nil {
		t.Fatal(err)
	}
	g, err := pggrant.New(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := g.Acquire(ctx, name); !errors.Is(err, fence.ErrTokenOverflow) {
		t.Fatalf("Acquire at MaxToken = %v; want fence.ErrTokenOverflow", err)
	}
	var tok int64
	var holder *string
	if err := pool.QueryRow(ctx, `SELECT fencing_token, holder FROM fence_lock_grants WHERE name = $1`, name).Scan(&tok, &holder); err != nil || tok != int64(fence.MaxToken) || holder != nil {
		t.Fatalf("row after the refused acquire: token %d holder %v, %v", tok, holder, err)
	}
}

// Close releases the Grantor's grants: another process gets them at once,
// with a higher token, and the closed grants' Done is closed.
func TestGrantor_CloseReleases(t *testing.T) {
	ctx := testCtx(t)
	g1, err := pggrant.Open(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("close-%d", time.Now().UnixNano())
	h, err := g1.Acquire(ctx, name, fence.WithTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	g1.Close()
	select {
	case <-h.Done():
	default:
		t.Fatal("Done open after the Grantor's Close")
	}
	g2 := open(t, pgAddr())
	h2, err := g2.Acquire(ctx, name) // no wait: Close released it
	if err != nil {
		t.Fatalf("acquire after the holder's Close: %v", err)
	}
	if h2.Grant().Token <= h.Grant().Token {
		t.Fatalf("token %d after %d", h2.Grant().Token, h.Grant().Token)
	}
	if _, err := g1.Acquire(ctx, name); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("Acquire on a closed Grantor = %v; want an error saying closed", err)
	}
	h2.Release(ctx)
}
