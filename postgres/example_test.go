package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/postgres"
)

// exampleDB connects to the example's database. In the examples below it is
// the test's throwaway server; in a program it is your own.
func exampleDB(ctx context.Context) *pgxpool.Pool {
	pool, err := pgxpool.New(ctx, pgURL)
	if err != nil {
		log.Fatal(err)
	}
	return pool
}

func ExampleGuard_InTx() {
	ctx := context.Background()
	pool := exampleDB(ctx)
	defer pool.Close()

	g := postgres.New(pool)
	if err := g.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS invoices (id int PRIMARY KEY, status text NOT NULL)")
	pool.Exec(ctx, "INSERT INTO invoices VALUES (42, 'open') ON CONFLICT DO NOTHING")

	pay := func(token fence.Token) error {
		return g.InTx(ctx, "example/invoice/42", token, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "UPDATE invoices SET status = $1 WHERE id = 42", fmt.Sprintf("paid under %d", token))
			return err
		})
	}
	fmt.Println(pay(34)) // the current holder
	err := pay(33)       // a former holder that woke up after a pause
	fmt.Println(errors.Is(err, fence.ErrStaleToken))
	fmt.Println(err)
	var status string
	pool.QueryRow(ctx, "SELECT status FROM invoices WHERE id = 42").Scan(&status)
	fmt.Println(status)
	// Output:
	// <nil>
	// true
	// fence: stale token 33 for "example/invoice/42": the object has accepted token 34; a write needs a token of at least 34
	// paid under 34
}

func ExampleUpdate() {
	ctx := context.Background()
	pool := exampleDB(ctx)
	defer pool.Close()

	pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS documents (id int PRIMARY KEY, body text, fencing_token bigint)")
	pool.Exec(ctx, "INSERT INTO documents (id, body) VALUES (7, 'draft') ON CONFLICT DO NOTHING")

	write := func(body string, token fence.Token) error {
		return postgres.Update(ctx, pool, postgres.FencedUpdate{
			Table: "documents", KeyColumn: "id", Key: 7,
			Set: map[string]any{"body": body},
		}, token)
	}
	fmt.Println(write("v1", 5))
	err := write("late", 4)
	var se *fence.StaleTokenError
	if errors.As(err, &se) {
		fmt.Printf("rejected: presented %d, required %d\n", se.Presented, se.Required)
	}
	err = postgres.Update(ctx, pool, postgres.FencedUpdate{
		Table: "documents", KeyColumn: "id", Key: 8, Set: map[string]any{"body": "x"},
	}, 5)
	fmt.Println(errors.Is(err, postgres.ErrNotFound))
	// Output:
	// <nil>
	// rejected: presented 4, required 5
	// true
}

func ExampleUpdateVersioned() {
	ctx := context.Background()
	pool := exampleDB(ctx)
	defer pool.Close()

	pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS wallets (id int PRIMARY KEY, balance bigint NOT NULL,
		version bigint NOT NULL DEFAULT 1, fencing_token bigint)`)
	pool.Exec(ctx, `INSERT INTO wallets (id, balance) VALUES (1, 100)
		ON CONFLICT (id) DO UPDATE SET balance = 100, version = 1, fencing_token = NULL`)

	withdraw := func(amount, readVersion int64, token fence.Token) (int64, error) {
		return postgres.UpdateVersioned(ctx, pool, postgres.VersionedUpdate{
			FencedUpdate: postgres.FencedUpdate{
				Table: "wallets", KeyColumn: "id", Key: 1,
				SetSQL: `"balance" = "balance" - $1`, SetArgs: []any{amount},
			},
			Expected: readVersion,
		}, token)
	}
	fmt.Println(withdraw(10, 1, 3))
	_, err := withdraw(10, 1, 3) // read version 1, but the row moved on
	var vm *fence.VersionMismatchError
	if errors.As(err, &vm) {
		fmt.Println("version mismatch; current version", vm.Current)
	}
	_, err = withdraw(10, 2, 2) // a stale holder
	fmt.Println(errors.Is(err, fence.ErrStaleToken))
	// Output:
	// 2 <nil>
	// version mismatch; current version 2
	// true
}
