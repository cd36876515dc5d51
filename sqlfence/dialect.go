package sqlfence

import (
	"database/sql"
	"fmt"
	"reflect"
	"strings"

	fence "github.com/fenced-dev/fenced"
)

// Dialect is the SQL dialect a Guard speaks. Choose it with WithDialect or
// let New detect it from the driver.
type Dialect int

// The dialects a Guard supports.
const (
	// Postgres is PostgreSQL, through any database/sql driver
	// (github.com/jackc/pgx/v5/stdlib, github.com/lib/pq).
	Postgres Dialect = iota + 1
	// SQLite is SQLite 3.35 or later (for RETURNING), through
	// modernc.org/sqlite or github.com/mattn/go-sqlite3.
	SQLite
)

// String returns the dialect's name.
func (d Dialect) String() string {
	switch d {
	case Postgres:
		return "postgres"
	case SQLite:
		return "sqlite"
	default:
		return fmt.Sprintf("Dialect(%d)", int(d))
	}
}

// Detect returns the dialect of db's driver, recognised by its Go package:
// a package path containing "sqlite" is SQLite; pgx, lib/pq or one
// containing "postgres" is Postgres. Other drivers are an error matching
// fence.ErrInvalidArgument; name the dialect with WithDialect.
func Detect(db *sql.DB) (Dialect, error) {
	t := reflect.TypeOf(db.Driver())
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	pkg := strings.ToLower(t.PkgPath())
	switch {
	case strings.Contains(pkg, "sqlite"):
		return SQLite, nil
	case strings.Contains(pkg, "jackc/pgx"), strings.Contains(pkg, "lib/pq"), strings.Contains(pkg, "postgres"):
		return Postgres, nil
	}
	return 0, fmt.Errorf("%w: sqlfence: cannot tell the SQL dialect of driver %s.%s; choose one with sqlfence.WithDialect", fence.ErrInvalidArgument, t.PkgPath(), t.Name())
}

// PostgresMigrationSQL creates the watermark table on PostgreSQL if it does
// not exist. It is the same table as package postgres uses.
const PostgresMigrationSQL = `CREATE TABLE IF NOT EXISTS fence_watermarks (
	object     text        PRIMARY KEY,
	token      bigint      NOT NULL CHECK (token > 0),
	updated_at timestamptz NOT NULL DEFAULT now()
)`

// SQLiteMigrationSQL creates the watermark table on SQLite if it does not
// exist.
const SQLiteMigrationSQL = `CREATE TABLE IF NOT EXISTS fence_watermarks (
	object     TEXT    NOT NULL PRIMARY KEY,
	token      INTEGER NOT NULL CHECK (token > 0),
	updated_at TEXT    NOT NULL DEFAULT CURRENT_TIMESTAMP
)`

// statements are a dialect's SQL.
type statements struct {
	migrate string
	// lock, when not empty, runs before migrate in the same transaction.
	lock string
	// accept inserts or raises the watermark; it returns no row when the
	// watermark is above the token. Arguments: object, token.
	accept string
	// read returns the watermark. Argument: object.
	read string
}

var dialects = map[Dialect]statements{
	Postgres: {
		migrate: PostgresMigrationSQL,
		lock:    "SELECT pg_advisory_xact_lock(7378424937698912615)", // "fencemig", as package postgres
		accept: `INSERT INTO fence_watermarks AS w (object, token, updated_at) VALUES ($1, $2, now())
ON CONFLICT (object) DO UPDATE SET token = EXCLUDED.token, updated_at = EXCLUDED.updated_at
WHERE w.token <= EXCLUDED.token
RETURNING w.token`,
		read: "SELECT token FROM fence_watermarks WHERE object = $1",
	},
	SQLite: {
		migrate: SQLiteMigrationSQL,
		accept: `INSERT INTO fence_watermarks AS w (object, token, updated_at) VALUES (?, ?, CURRENT_TIMESTAMP)
ON CONFLICT (object) DO UPDATE SET token = excluded.token, updated_at = excluded.updated_at
WHERE w.token <= excluded.token
RETURNING token`,
		read: "SELECT token FROM fence_watermarks WHERE object = ?",
	},
}
