package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/outbox"
	"github.com/fenced-dev/fenced/postgres"
)

func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgURL)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if err := outbox.Migrate(ctx, pool); err != nil {
		log.Fatal(err)
	}
	orders := postgres.New(pool)
	if err := orders.Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	// A worker ships order 7 under its grant and enqueues the e-mail in
	// the same fenced transaction.
	ship := func(token fence.Token) error {
		return orders.InTx(ctx, "example/order-7", token, func(tx pgx.Tx) error {
			_, err := outbox.Enqueue(ctx, tx, outbox.Command{
				Resource: "example/order-7/email", Token: token, Payload: []byte("your order has shipped"),
			})
			return err
		})
	}
	fmt.Println(ship(12))
	fmt.Println(errors.Is(ship(11), fence.ErrStaleToken)) // a paused former holder enqueues nothing

	// The dispatcher, on a dedicated connection.
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	d := &outbox.Dispatcher{Deliver: func(ctx context.Context, d outbox.Delivery) error {
		fmt.Printf("send %q with Idempotency-Key %s\n", d.Payload, d.Key)
		return nil
	}}
	n, err := d.Drain(ctx, conn)
	fmt.Println(n, err)
	// Output:
	// <nil>
	// true
	// send "your order has shipped" with Idempotency-Key example/order-7/email:12
	// 1 <nil>
}

func ExampleGuard_Before() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgURL)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	g := outbox.NewGuard(pool)
	key, err := g.Before(ctx, "example/invoice-42/charge", 34)
	fmt.Println(key, err) // call the payment API with key
	_, err = g.Before(ctx, "example/invoice-42/charge", 33)
	fmt.Println(err)
	// Output:
	// example/invoice-42/charge:34 <nil>
	// fence: stale token 33 for "example/invoice-42/charge": the object has accepted token 34; a write needs a token of at least 34
}

func ExampleIdempotencyKey() {
	fmt.Println(outbox.IdempotencyKey("order-7/shipping-email", 12))
	// Output: order-7/shipping-email:12
}
