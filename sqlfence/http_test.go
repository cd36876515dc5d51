package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/httpfence/httpfencetest"
	"github.com/fenced-dev/fenced/sqlfence"
)

// TestGuard_HTTP serves rows of fence_test_values behind the httpfence
// middleware with a Guard, on SQLite and PostgreSQL: the handler's write
// runs in the transaction that checks the token.
func TestGuard_HTTP(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			tg := newTarget(t, b)
			put, get := "INSERT INTO fence_test_values (object, value) VALUES (?, ?) ON CONFLICT (object) DO UPDATE SET value = excluded.value",
				"SELECT value FROM fence_test_values WHERE object = ?"
			if tg.g.Dialect() == sqlfence.Postgres {
				put, get = "INSERT INTO fence_test_values (object, value) VALUES ($1, $2) ON CONFLICT (object) DO UPDATE SET value = excluded.value",
					"SELECT value FROM fence_test_values WHERE object = $1"
			}
			httpfencetest.Run(t, httpfencetest.Resource{
				Guard: tg.g,
				Write: func(ctx context.Context, object string, _ fence.Token, value string) error {
					tx, ok := sqlfence.TxFromContext(ctx)
					if !ok {
						return errors.New("the handler's context has no transaction")
					}
					_, err := tx.ExecContext(ctx, put, object, value)
					return err
				},
				Read: func(ctx context.Context, object string) (string, error) {
					var v string
					err := tg.db.QueryRowContext(ctx, get, object).Scan(&v)
					if errors.Is(err, sql.ErrNoRows) {
						return "", nil
					}
					return v, err
				},
			})
		})
	}
}
