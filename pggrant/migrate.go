package pggrant

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SchemaVersion is the schema version this package needs: the number of
// the last file in migrations/.
const SchemaVersion = 2

// Migrations holds the schema migrations as SQL files, one per version
// (001_lock_grants.sql, 002_work_claims.sql), for users who run their
// migrations with their own tool: apply them in order. Each is idempotent
// and none drops or resets a token counter. Migrate applies the same
// files.
//
//go:embed migrations/*.sql
var Migrations embed.FS

// ErrSchema reports a database whose pggrant schema is missing, older or
// newer than SchemaVersion. Nothing was written; the message names the
// migrations to run.
var ErrSchema = errors.New("pggrant: schema not at the version this package needs")

// migrateLockKey is the transaction-level advisory lock Migrate takes so
// that concurrent migrations do not race ("fencegrt").
const migrateLockKey int64 = 0x66656e6365677274

// migration is one file of Migrations.
type migration struct {
	version int
	file    string
	sql     string
}

func migrations() []migration {
	files, err := fs.Glob(Migrations, "migrations/*.sql")
	if err != nil {
		panic(err)
	}
	sort.Strings(files)
	out := make([]migration, 0, len(files))
	for _, f := range files {
		base := strings.TrimPrefix(f, "migrations/")
		v, err := strconv.Atoi(base[:3])
		if err != nil {
			panic("pggrant: migration file without a number: " + f)
		}
		b, err := Migrations.ReadFile(f)
		if err != nil {
			panic(err)
		}
		out = append(out, migration{version: v, file: base, sql: string(b)})
	}
	return out
}

// Beginner is what Migrate needs of PostgreSQL: *pgxpool.Pool and
// *pgx.Conn implement it.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Migrate brings the database's pggrant schema to SchemaVersion, applying
// the migrations it lacks in order, in one transaction under an advisory
// lock (so that several processes may run it at once). It never drops a
// table or resets a counter. It fails with ErrSchema, changing nothing,
// when the database's schema is newer than this package's.
func Migrate(ctx context.Context, db Beginner) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrateLockKey); err != nil {
			return fmt.Errorf("pggrant: migrate: %w", err)
		}
		have, _, err := schemaVersion(ctx, tx)
		if err != nil {
			return fmt.Errorf("pggrant: migrate: %w", err)
		}
		if have > SchemaVersion {
			return fmt.Errorf("%w: the database has schema version %d, newer than this pggrant's %d; upgrade the program, nothing was changed", ErrSchema, have, SchemaVersion)
		}
		for _, m := range migrations() {
			if m.version <= have {
				continue
			}
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("pggrant: migrate: %s: %w", m.file, err)
			}
		}
		return nil
	})
}

// querier is what the schema check reads with.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// schemaVersion reads the schema version (0 when the schema table does not
// exist) and the issuer.
func schemaVersion(ctx context.Context, q querier) (int, string, error) {
	var exists bool
	if err := q.QueryRow(ctx, `SELECT to_regclass('fence_grantor_schema') IS NOT NULL`).Scan(&exists); err != nil {
		return 0, "", err
	}
	if !exists {
		return 0, "", nil
	}
	var v int
	var issuer string
	err := q.QueryRow(ctx, `SELECT version, issuer FROM fence_grantor_schema`).Scan(&v, &issuer)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, "", nil
	}
	return v, issuer, err
}

// checkSchema returns the issuer when the schema is at SchemaVersion, and
// an error wrapping ErrSchema naming the migrations to run otherwise.
func checkSchema(ctx context.Context, q querier) (string, error) {
	v, issuer, err := schemaVersion(ctx, q)
	switch {
	case err != nil:
		return "", fmt.Errorf("pggrant: read the schema version: %w", err)
	case v > SchemaVersion:
		return "", fmt.Errorf("%w: the database has schema version %d, newer than this pggrant's %d; upgrade the program", ErrSchema, v, SchemaVersion)
	case v < SchemaVersion:
		var missing []string
		for _, m := range migrations() {
			if m.version > v {
				missing = append(missing, m.file)
			}
		}
		what := "missing"
		if v > 0 {
			what = fmt.Sprintf("at version %d, older than %d", v, SchemaVersion)
		}
		return "", fmt.Errorf("%w: the pggrant schema is %s: run pggrant.Migrate(ctx, pool), or apply %s from pggrant/migrations (pggrant.Migrations) in order; nothing was written",
			ErrSchema, what, strings.Join(missing, ", "))
	}
	return issuer, nil
}

// MigrateDSN is Migrate on a connection of its own to the database at
// dsn (a pool's DSN: its pool_ settings are ignored), for tools that have
// no pool.
func MigrateDSN(ctx context.Context, dsn string) error {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return fmt.Errorf("pggrant: migrate: parse the connection string: %w", err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return fmt.Errorf("pggrant: migrate: connect: %w", err)
	}
	defer conn.Close(context.Background())
	return Migrate(ctx, conn)
}
