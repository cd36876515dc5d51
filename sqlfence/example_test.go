package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/sqlfence"
)

func ExampleGuard_InTx() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "sqlfence-example-")
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	g, err := sqlfence.New(db)
	if err != nil {
		log.Fatal(err)
	}
	if err := g.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	db.ExecContext(ctx, "CREATE TABLE reports (name TEXT PRIMARY KEY, body TEXT)")
	db.ExecContext(ctx, "INSERT INTO reports VALUES ('daily', '')")

	publish := func(body string, token fence.Token) error {
		return g.InTx(ctx, "report/daily", token, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, "UPDATE reports SET body = ? WHERE name = 'daily'", body)
			return err
		})
	}
	fmt.Println(g.Dialect())
	fmt.Println(publish("from the current holder", 12))
	err = publish("from a paused former holder", 11)
	var se *fence.StaleTokenError
	if errors.As(err, &se) {
		fmt.Printf("rejected: presented %d, required %d\n", se.Presented, se.Required)
	}
	var body string
	db.QueryRowContext(ctx, "SELECT body FROM reports WHERE name = 'daily'").Scan(&body)
	fmt.Println(body)
	// Output:
	// sqlite
	// <nil>
	// rejected: presented 11, required 12
	// from the current holder
}
