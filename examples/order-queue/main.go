// Command order-queue tells the work-queue story with fenced claims:
//
//  1. producers push orders onto the queue "orders" (a dedupe key per
//     order, so a producer's retry, or a second producer, enqueues once);
//  2. workers claim orders; each claim carries a claim token from the
//     cluster's one counter;
//  3. a worker writes the order's state to PostgreSQL through the postgres
//     guard (package postgres) with its claim token, object "orders/ITEM",
//     then acks the claim;
//  4. a worker that is paused (a GC pause, SIGSTOP, a VM migration) past
//     its claim's visibility timeout loses the claim: the order goes back
//     to the queue and another worker claims it with a higher token and
//     writes it;
//  5. when the paused worker wakes up, still believing it holds the claim,
//     its late database write is rejected by the guard (its token is below
//     the order's watermark) and its late ack is refused by fenced (its
//     token is not the item's current claim). Every order is processed and
//     none is written twice.
//
// Delivery is at least once: the claim token at the resource is what makes
// the duplicate delivery harmless, not the visibility timeout.
//
//	order-queue produce --endpoints 127.0.0.1:7700 --orders 5
//	order-queue work --endpoints 127.0.0.1:7700 --pg postgres://... --name A
//
// The test (main_test.go) runs it with real processes: a fenced server, a
// throwaway PostgreSQL, a producer run twice and two workers, one of which
// stops itself (SIGSTOP) right after its first claim and is resumed after
// the other worker has processed every order.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/postgres"
)

const queueName = "orders"

// tableSQL is the example's table: one row per order, with the worker and
// token of its last accepted write and how many writes were accepted.
const tableSQL = `CREATE TABLE IF NOT EXISTS orders (
	id     text PRIMARY KEY,
	state  text NOT NULL,
	worker text NOT NULL,
	token  bigint NOT NULL,
	writes int NOT NULL
)`

// order is a queue item's payload.
type order struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "order-queue:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: order-queue produce|work [flags]")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	endpoints := fs.String("endpoints", "127.0.0.1:7700", "fenced endpoints, comma-separated")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	switch args[0] {
	case "produce":
		n := fs.Int("orders", 5, "orders to push")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		c, err := newClient(*endpoints)
		if err != nil {
			return err
		}
		defer c.Close()
		return produce(ctx, out, c, *n)
	case "work":
		pg := fs.String("pg", "", "PostgreSQL connection URL")
		name := fs.String("name", "worker", "this worker's name")
		visibility := fs.Duration("visibility", 2*time.Second, "claim visibility timeout")
		maxItems := fs.Int("max-items", 0, "exit after this many orders (0: never)")
		stop := fs.Bool("stop-after-first-claim", false, "SIGSTOP this process right after its first claim (the paused worker of the story)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		c, err := newClient(*endpoints)
		if err != nil {
			return err
		}
		defer c.Close()
		pool, err := pgxpool.New(ctx, *pg)
		if err != nil {
			return err
		}
		defer pool.Close()
		return work(ctx, out, c, pool, *name, *visibility, *maxItems, *stop)
	}
	return fmt.Errorf("unknown command %q; want produce or work", args[0])
}

func newClient(endpoints string) (*client.Client, error) {
	return client.New(strings.Split(endpoints, ","), client.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
}

// produce pushes n orders, each with its id as the dedupe key: running it
// again enqueues nothing new.
func produce(ctx context.Context, out io.Writer, c *client.Client, n int) error {
	q := client.NewQueue(c, queueName)
	for i := 1; i <= n; i++ {
		o := order{ID: fmt.Sprintf("order-%d", i), Amount: 10 * i}
		payload, _ := json.Marshal(o)
		item, dup, err := q.Push(ctx, payload, client.WithDedupeKey(o.ID))
		if err != nil {
			return err
		}
		what := "pushed"
		if dup {
			what = "already queued"
		}
		fmt.Fprintf(out, "producer: %s %s as %s/%d\n", o.ID, what, queueName, item)
	}
	return nil
}

// work claims orders and writes each to PostgreSQL with its claim token.
func work(ctx context.Context, out io.Writer, c *client.Client, pool *pgxpool.Pool, name string, visibility time.Duration, maxItems int, stopAfterFirst bool) error {
	g := postgres.New(pool)
	if err := g.Migrate(ctx); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, tableSQL); err != nil {
		return err
	}
	// A session TTL well above the pause: the claim is lost to its
	// visibility timeout, not to the session.
	s, err := c.NewSession(ctx, client.WithTTL(60*time.Second))
	if err != nil {
		return err
	}
	defer s.Close(context.Background())
	q := client.NewQueue(c, queueName)
	for n := 0; maxItems == 0 || n < maxItems; n++ {
		cl, err := q.Claim(ctx, s, visibility)
		if err != nil {
			return err
		}
		var o order
		if err := json.Unmarshal(cl.Payload, &o); err != nil {
			return fmt.Errorf("%s: payload %q: %w", cl.Scope, cl.Payload, err)
		}
		fmt.Fprintf(out, "%s: claimed %s (%s) token %d, delivery %d\n", name, cl.Scope, o.ID, cl.Token, cl.Deliveries)
		if stopAfterFirst && n == 0 {
			fmt.Fprintf(out, "%s: pausing (SIGSTOP) with the claim of %s\n", name, cl.Scope)
			pause()
			fmt.Fprintf(out, "%s: resumed; writing %s as if nothing happened\n", name, o.ID)
		}
		// The write goes ahead whatever the claim's Context says: a worker
		// that was paused cannot know in time. The guard decides.
		err = g.InTx(context.Background(), cl.Scope, cl.Token, func(tx pgx.Tx) error {
			_, err := tx.Exec(context.Background(), `INSERT INTO orders (id, state, worker, token, writes) VALUES ($1, 'processed', $2, $3, 1)
				ON CONFLICT (id) DO UPDATE SET state = 'processed', worker = $2, token = $3, writes = orders.writes + 1`, o.ID, name, int64(cl.Token))
			return err
		})
		var se *fence.StaleTokenError
		switch {
		case errors.As(err, &se):
			fmt.Fprintf(out, "%s: write of %s with token %d rejected by the database guard: required token %d\n", name, o.ID, cl.Token, se.Required)
		case err != nil:
			return err
		default:
			fmt.Fprintf(out, "%s: wrote %s with token %d\n", name, o.ID, cl.Token)
		}
		if err := cl.Ack(ctx); errors.Is(err, fence.ErrStaleToken) {
			fmt.Fprintf(out, "%s: ack of %s with token %d rejected by fenced: %v\n", name, cl.Scope, cl.Token, err)
		} else if err != nil {
			return err
		} else {
			fmt.Fprintf(out, "%s: acked %s token %d\n", name, cl.Scope, cl.Token)
		}
	}
	return nil
}

// pause stops this process (SIGSTOP) and returns once it is continued
// (SIGCONT). kill(2) returns before the process has stopped: the signal
// stops the main thread first and the other threads when it gets to them,
// so the thread that sent it runs on meanwhile. On a busy machine that was
// long enough for the worker to begin its database transaction and raise
// the watermark before it stopped, holding the row's lock that the other
// worker then waited for. Waiting for the SIGCONT keeps this goroutine
// from going on until the process was really stopped and continued.
func pause() {
	cont := make(chan os.Signal, 1)
	signal.Notify(cont, syscall.SIGCONT)
	defer signal.Stop(cont)
	syscall.Kill(syscall.Getpid(), syscall.SIGSTOP)
	<-cont
}
