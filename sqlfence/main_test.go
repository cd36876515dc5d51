package sqlfence_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/fenced-dev/fenced/internal/testdb"
	"github.com/fenced-dev/fenced/sqlfence"
)

// pgURL is the connection string of the test binary's PostgreSQL server.
var pgURL string

// TestMain starts a throwaway PostgreSQL server for the package's tests. A
// server that cannot start fails the tests; it never skips them.
func TestMain(m *testing.M) {
	pg, err := testdb.StartPostgres()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sqlfence tests need a real PostgreSQL:", err)
		os.Exit(1)
	}
	pgURL = pg.URL
	code := m.Run()
	pg.Stop()
	os.Exit(code)
}

// backend is a database the tests run against.
type backend struct {
	name string
	open func(t testing.TB) *sql.DB
	// append is the statement that appends $2/? to object's value.
	append string
}

// sqliteBackend opens a SQLite file in a temporary directory with several
// connections, so that concurrency is real, and a busy timeout. dsn adds
// parameters.
func sqliteBackend(name, dsn string) backend {
	return backend{
		name: name,
		open: func(t testing.TB) *sql.DB {
			path := filepath.Join(t.TempDir(), "fence.db")
			db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(30000)"+dsn)
			if err != nil {
				t.Fatal(err)
			}
			db.SetMaxOpenConns(8)
			t.Cleanup(func() { db.Close() })
			return migrate(t, db)
		},
		append: `INSERT INTO fence_test_values AS v (object, value) VALUES (?, ?)
ON CONFLICT (object) DO UPDATE SET value = v.value || ',' || excluded.value`,
	}
}

var backends = []backend{
	sqliteBackend("sqlite-wal", "&_pragma=journal_mode(WAL)"),
	sqliteBackend("sqlite-rollback-journal", "&_pragma=journal_mode(DELETE)"),
	sqliteBackend("sqlite-txlock-immediate", "&_pragma=journal_mode(WAL)&_txlock=immediate"),
	{
		name: "postgres",
		open: func(t testing.TB) *sql.DB {
			db, err := sql.Open("pgx", pgURL)
			if err != nil {
				t.Fatal(err)
			}
			db.SetMaxOpenConns(16)
			t.Cleanup(func() { db.Close() })
			return migrate(t, db)
		},
		append: `INSERT INTO fence_test_values AS v (object, value) VALUES ($1, $2)
ON CONFLICT (object) DO UPDATE SET value = v.value || ',' || EXCLUDED.value`,
	},
}

// migrate creates the watermark table and the tests' value tables.
func migrate(t testing.TB, db *sql.DB) *sql.DB {
	t.Helper()
	g, err := sqlfence.New(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Migrate(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"CREATE TABLE IF NOT EXISTS fence_test_values (object TEXT PRIMARY KEY, value TEXT NOT NULL)",
		"CREATE TABLE IF NOT EXISTS fence_test_counters (name TEXT PRIMARY KEY, n INTEGER NOT NULL)",
	} {
		if _, err := db.ExecContext(testCtx(t), q); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var nameSeq atomic.Int64

// uniqueName returns a name unique in this test binary's run.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano(), nameSeq.Add(1))
}
