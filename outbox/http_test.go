package outbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/httpfence/httpfencetest"
	"github.com/fenced-dev/fenced/outbox"
	"github.com/fenced-dev/fenced/postgres"
)

// TestGuard_HTTP serves the outbox behind the httpfence middleware with a
// Guard: the handler enqueues its command in the transaction that checks
// the token, so a stale request enqueues nothing. The stored value is the
// payload of the resource's latest command.
func TestGuard_HTTP(t *testing.T) {
	pool := newPool(t)
	// The commands stay pending; leave none behind for the dispatchers of
	// later tests and examples.
	t.Cleanup(func() { clearOutbox(t, context.Background(), pool) })
	httpfencetest.Run(t, httpfencetest.Resource{
		Guard: outbox.NewGuard(pool),
		Write: func(ctx context.Context, object string, t fence.Token, value string) error {
			tx, ok := postgres.TxFromContext(ctx)
			if !ok {
				return errors.New("the handler's context has no transaction")
			}
			_, err := outbox.Enqueue(ctx, tx, outbox.Command{Resource: object, Token: t, Payload: []byte(value)})
			return err
		},
		Read: func(ctx context.Context, object string) (string, error) {
			var payload []byte
			err := pool.QueryRow(ctx, "SELECT payload FROM "+outbox.Table+" WHERE resource = $1 ORDER BY id DESC LIMIT 1", object).Scan(&payload)
			if errors.Is(err, pgx.ErrNoRows) {
				return "", nil
			}
			return string(payload), err
		},
	})
}
