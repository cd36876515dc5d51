package pggrant_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fenced-dev/fenced/internal/testdb"
	"github.com/fenced-dev/fenced/pggrant"
)

// pg is the test binary's PostgreSQL server, migrated.
var pg *testdb.Postgres

// TestMain starts a throwaway PostgreSQL server for the package's tests
// (none when the binary runs as a holder process, see holder_test.go). A
// server that cannot start fails the tests; it never skips them.
func TestMain(m *testing.M) {
	if os.Getenv(holderEnv) != "" {
		os.Exit(runHolder())
	}
	var err error
	pg, err = testdb.StartPostgres()
	if err != nil {
		fmt.Fprintln(os.Stderr, "pggrant tests need a real PostgreSQL:", err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	pool, err := pgxpool.New(ctx, pg.URL)
	if err == nil {
		err = pggrant.Migrate(ctx, pool)
		pool.Close()
	}
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "migrate:", err)
		pg.Stop()
		os.Exit(1)
	}
	code := m.Run()
	pg.Stop()
	os.Exit(code)
}

// dsn is the test server's connection string through addr ("host:port").
func dsn(addr string) string {
	return "postgres://postgres@" + addr + "/postgres?sslmode=disable&connect_timeout=5"
}

func pgAddr() string { return "127.0.0.1:" + strconv.Itoa(pg.Port) }

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// open returns a Grantor on the test server through addr, closed when t
// ends.
func open(t testing.TB, addr string, opts ...pggrant.Option) *pggrant.Grantor {
	t.Helper()
	g, err := pggrant.Open(testCtx(t), dsn(addr), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}
