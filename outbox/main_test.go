package outbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/internal/testdb"
	"github.com/fenced-dev/fenced/outbox"
)

// pgURL is the connection string of the test binary's PostgreSQL server.
var pgURL string

// TestMain starts a throwaway PostgreSQL server for the package's tests. A
// server that cannot start fails the tests; it never skips them. Started
// with OUTBOX_HELPER_DISPATCHER set, the test binary is instead a
// dispatcher process for TestDispatcher_KilledProcess.
func TestMain(m *testing.M) {
	if os.Getenv("OUTBOX_HELPER_DISPATCHER") != "" {
		os.Exit(helperDispatcher())
	}
	pg, err := testdb.StartPostgres()
	if err != nil {
		fmt.Fprintln(os.Stderr, "outbox tests need a real PostgreSQL:", err)
		os.Exit(1)
	}
	pgURL = pg.URL
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	conn, err := pgx.Connect(ctx, pgURL)
	if err == nil {
		err = outbox.Migrate(ctx, conn)
		conn.Close(ctx)
	}
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "migrate:", err)
		pg.Stop()
		os.Exit(1)
	}
	code := m.Run()
	pg.Stop()
	os.Exit(code)
}

// helperDispatcher runs a dispatcher that delivers to the receiver at
// OUTBOX_RECEIVER until it is killed.
func helperDispatcher() int {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, os.Getenv("OUTBOX_PG_URL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	d := &outbox.Dispatcher{Deliver: httpDeliver(os.Getenv("OUTBOX_RECEIVER")), PollInterval: 10 * time.Millisecond}
	if err := d.Run(ctx, conn); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// httpDeliver posts each delivery to a receiver's URL.
func httpDeliver(url string) func(context.Context, outbox.Delivery) error {
	return func(ctx context.Context, d outbox.Delivery) error {
		body, _ := json.Marshal(call{Key: d.Key, ID: d.ID, Attempt: d.Attempt})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Idempotency-Key", d.Key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("receiver answered %s", resp.Status)
		}
		return nil
	}
}

// call is one call a receiver got.
type call struct {
	Key     string `json:"key"`
	ID      int64  `json:"id"`
	Attempt int    `json:"attempt"`
	Pid     int    `json:"-"`
}

// receiver records every call it gets, in order. It is the external
// system: it does not deduplicate, so the tests see every repeat.
type receiver struct {
	mu    sync.Mutex
	calls []call
	// fail, if set, makes a call fail when it returns an error.
	fail func(c call) error
	// after, if set, runs after a call was recorded, before the answer.
	after func(c call)
}

func (r *receiver) Deliver(ctx context.Context, d outbox.Delivery) error {
	c := call{Key: d.Key, ID: d.ID, Attempt: d.Attempt}
	r.mu.Lock()
	fail, after := r.fail, r.after
	r.mu.Unlock()
	if fail != nil {
		if err := fail(c); err != nil {
			return err
		}
	}
	r.record(c)
	if after != nil {
		after(c)
	}
	return nil
}

func (r *receiver) record(c call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
}

func (r *receiver) Calls() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]call(nil), r.calls...)
}

// ServeHTTP records a call posted by httpDeliver.
func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var c call
	if err := json.NewDecoder(req.Body).Decode(&c); err != nil || c.Key != req.Header.Get("Idempotency-Key") {
		http.Error(w, "bad call", http.StatusBadRequest)
		return
	}
	r.record(c)
	r.mu.Lock()
	after := r.after
	r.mu.Unlock()
	if after != nil {
		after(c)
	}
}

func newReceiverServer(t *testing.T, r *receiver) *httptest.Server {
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv
}

func newPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), pgURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// newConn returns a dedicated connection for a dispatcher, closed when t
// ends.
func newConn(t testing.TB) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), pgURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var nameSeq atomic.Int64

func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano(), nameSeq.Add(1))
}

// enqueue commits one command in a transaction of its own.
func enqueue(t testing.TB, ctx context.Context, pool *pgxpool.Pool, resource string, tok fence.Token) int64 {
	t.Helper()
	var id int64
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var err error
		id, err = outbox.Enqueue(ctx, tx, outbox.Command{Resource: resource, Token: tok, Payload: []byte(resource)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// clearOutbox marks every command left by an earlier test as delivered,
// so that each test's dispatcher sees only its own. Tests that run a
// dispatcher must not run in parallel: only one dispatcher runs at a time.
func clearOutbox(t testing.TB, ctx context.Context, pool *pgxpool.Pool) {
	t.Helper()
	if _, err := pool.Exec(ctx, "UPDATE fence_outbox SET state = 'delivered' WHERE state = 'pending'"); err != nil {
		t.Fatal(err)
	}
}

// fastDispatcher returns a Dispatcher with short waits.
func fastDispatcher(deliver func(context.Context, outbox.Delivery) error) *outbox.Dispatcher {
	return &outbox.Dispatcher{Deliver: deliver, PollInterval: 5 * time.Millisecond, MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond}
}

func lookup(t testing.TB, ctx context.Context, pool *pgxpool.Pool, id int64) outbox.Entry {
	t.Helper()
	e, err := outbox.Lookup(ctx, pool, id)
	if err != nil {
		t.Fatal(err)
	}
	return e
}
