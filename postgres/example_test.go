package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
	"github.com/fenced-dev/fenced/httpfence"
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

// Behind the httpfence middleware a Guard serves fenced requests directly:
// the handler's write runs in the transaction that checks the request's
// token, and a stale request is answered 409 with nothing written.
func ExampleGuard_Do() {
	ctx := context.Background()
	pool := exampleDB(ctx)
	defer pool.Close()
	g := postgres.New(pool)
	if err := g.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS notes (id text PRIMARY KEY, body text NOT NULL)")
	pool.Exec(ctx, "DELETE FROM notes WHERE id = 'example-note'")
	pool.Exec(ctx, "DELETE FROM fence_watermarks WHERE object = 'example-note'")

	mw, err := httpfence.New(httpfence.Config{Guard: g})
	if err != nil {
		log.Fatal(err)
	}
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		err := guard.Do(r.Context(), func(ctx context.Context) error {
			tx, _ := postgres.TxFromContext(ctx) // the transaction that checked the token
			_, err := tx.Exec(ctx, `INSERT INTO notes (id, body) VALUES ('example-note', $1)
ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body`, string(body))
			return err
		})
		if err != nil {
			if !httpfence.WriteError(w, err) {
				http.Error(w, err.Error(), http.StatusInternalServerError)
			}
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	put := func(token, body string) {
		req := httptest.NewRequest(http.MethodPut, "/notes/1", strings.NewReader(body))
		req.Header.Set(httpfence.HeaderToken, token)
		req.Header.Set(httpfence.HeaderResourceID, "example-note")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		fmt.Printf("%d, required %q\n", rec.Code, rec.Header().Get(httpfence.HeaderRequiredToken))
	}
	put("34", "from 34")
	put("33", "from 33")
	var body string
	pool.QueryRow(ctx, "SELECT body FROM notes WHERE id = 'example-note'").Scan(&body)
	fmt.Println(body)
	// Output:
	// 204, required ""
	// 409, required "34"
	// from 34
}
