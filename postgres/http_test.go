package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/httpfence/httpfencetest"
	"github.com/fenced-dev/fenced/postgres"
)

// TestGuard_HTTP serves rows of guard_values behind the httpfence
// middleware with a Guard: the handler's write runs in the transaction
// that checks the token.
func TestGuard_HTTP(t *testing.T) {
	pool := newPool(t)
	httpfencetest.Run(t, httpfencetest.Resource{
		Guard: postgres.New(pool),
		Write: func(ctx context.Context, object string, _ fence.Token, value string) error {
			tx, ok := postgres.TxFromContext(ctx)
			if !ok {
				return errors.New("the handler's context has no transaction")
			}
			_, err := tx.Exec(ctx, `INSERT INTO guard_values (object, value) VALUES ($1, $2)
ON CONFLICT (object) DO UPDATE SET value = EXCLUDED.value`, object, value)
			return err
		},
		Read: func(ctx context.Context, object string) (string, error) {
			var v string
			err := pool.QueryRow(ctx, "SELECT value FROM guard_values WHERE object = $1", object).Scan(&v)
			if errors.Is(err, pgx.ErrNoRows) {
				return "", nil
			}
			return v, err
		},
	})
}
