package pggrant_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/testserver"
	"github.com/fenced-dev/fenced/postgres"
)

// writeOrder is the application's code, written against fence.Grantor
// alone: it takes the lock and writes the order through the guard with
// the grant's token. It does not change when the grantor does.
func writeOrder(ctx context.Context, g fence.Grantor, guard *postgres.Guard, order, value string) (fence.Held, error) {
	h, err := g.Acquire(ctx, order, fence.Wait())
	if err != nil {
		return nil, err
	}
	return h, writeWith(ctx, guard, order, h.Grant().Token, value)
}

func writeWith(ctx context.Context, guard *postgres.Guard, order string, t fence.Token, value string) error {
	return guard.InTx(ctx, order, t, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO pggrant_test_values (object, value) VALUES ($1, $2)
			ON CONFLICT (object) DO UPDATE SET value = $2`, order, value)
		return err
	})
}

// A live name moves from the PostgreSQL grantor to the fenced server
// started with --token-floor at the table's highest token: the same
// application code, with only the constructor changed, gets a token above
// every PostgreSQL token; the guard accepts the new holder and rejects
// the old one, which still holds its PostgreSQL grant.
func TestSwitch_PostgresToServer(t *testing.T) {
	ctx := testCtx(t)
	pool := pgxPool(t)
	guard := postgres.New(pool)
	if err := guard.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS pggrant_test_values (object text PRIMARY KEY, value text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	order := fmt.Sprintf("orders/%d", time.Now().UnixNano())

	// Before: the application runs on PostgreSQL.
	pgGrantor := open(t, pgAddr())
	for i := range 3 { // some history, so the counter is above 1
		h, err := writeOrder(ctx, pgGrantor, guard, order, fmt.Sprintf("pg %d", i))
		if err != nil {
			t.Fatal(err)
		}
		h.Release(ctx)
	}
	old, err := writeOrder(ctx, pgGrantor, guard, order, "pg, still held")
	if err != nil {
		t.Fatal(err)
	}
	oldToken := old.Grant().Token

	// The move: read the floor from the store's counter and start the
	// server with it (fenced serve --token-floor N).
	floor, err := pgGrantor.MaxToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if floor < oldToken {
		t.Fatalf("MaxToken %d is below a token the table issued, %d", floor, oldToken)
	}
	srv := testserver.Start(t, testserver.WithTokenFloor(floor))
	c, err := client.New([]string{srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// After: the same code, one constructor changed.
	var serverGrantor fence.Grantor = client.NewGrantor(c)
	h, err := writeOrder(ctx, serverGrantor, guard, order, "server")
	if err != nil {
		t.Fatalf("the new holder's write through the guard: %v", err)
	}
	if h.Grant().Token <= floor {
		t.Fatalf("server token %d is not above the floor %d", h.Grant().Token, floor)
	}
	// The old holder, still holding its PostgreSQL grant, writes late.
	if err := old.Verify(ctx); err != nil {
		t.Fatalf("the old holder's PostgreSQL grant: %v; want still held (the move does not end it)", err)
	}
	err = writeWith(ctx, guard, order, oldToken, "pg, late")
	var stale *fence.StaleTokenError
	if !errors.As(err, &stale) || stale.Required != h.Grant().Token {
		t.Fatalf("the old holder's write with token %d = %v; want stale, requiring %d", oldToken, err, h.Grant().Token)
	}
	var value string
	if err := pool.QueryRow(ctx, `SELECT value FROM pggrant_test_values WHERE object = $1`, order).Scan(&value); err != nil || value != "server" {
		t.Fatalf("value = %q, %v; want the server holder's", value, err)
	}
	if res, err := h.Release(ctx); err != nil || res != fence.Released {
		t.Fatalf("release on the server = %q, %v", res, err)
	}
	old.Release(ctx)

	// Without the floor, a fresh server's tokens start low again: the
	// guard refuses them, which is why the move needs --token-floor.
	bare := testserver.Start(t)
	c2, err := client.New([]string{bare.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if h, err := writeOrder(ctx, client.NewGrantor(c2), guard, order, "server without a floor"); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("a write with a token of a server without a floor = %v; want stale", err)
	} else {
		h.Release(ctx)
	}
}
