package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fenced-dev/fenced/internal/proctest"
	"github.com/fenced-dev/fenced/internal/testdb"
)

// TestMain runs the example itself when the test binary is started as a
// producer or worker (ORDER_QUEUE_CHILD=1): the test's processes are real
// processes of this program.
func TestMain(m *testing.M) {
	if os.Getenv("ORDER_QUEUE_CHILD") == "1" {
		if err := run(os.Args[1:], os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "order-queue:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(proctest.Main(m))
}

// child is a producer or worker process.
type child struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  strings.Builder
	line chan string
	done chan error
}

func start(t *testing.T, args ...string) *child {
	t.Helper()
	c := &child{cmd: exec.Command(os.Args[0], args...), line: make(chan string, 100), done: make(chan error, 1)}
	c.cmd.Env = append(os.Environ(), "ORDER_QUEUE_CHILD=1")
	c.cmd.Stderr = os.Stderr
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.mu.Lock()
			c.out.WriteString(sc.Text() + "\n")
			c.mu.Unlock()
			select {
			case c.line <- sc.Text():
			default:
			}
		}
		io.Copy(io.Discard, stdout)
		c.done <- c.cmd.Wait()
	}()
	t.Cleanup(func() {
		c.cmd.Process.Signal(syscall.SIGCONT)
		c.cmd.Process.Kill()
	})
	return c
}

func (c *child) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

// wait waits up to d for the child to exit successfully; when it does
// not, the test fails with its output and what diagnose (when set)
// reports.
func (c *child) wait(t *testing.T, d time.Duration, diagnose ...func() string) {
	t.Helper()
	select {
	case err := <-c.done:
		if err != nil {
			t.Fatalf("%v: %v\n%s", c.cmd.Args[1:], err, c.output())
		}
	case <-time.After(d):
		more := ""
		for _, f := range diagnose {
			more += f()
		}
		t.Fatalf("%v did not exit within %v:\n%s%s", c.cmd.Args[1:], d, c.output(), more)
	}
}

// pgActivity describes what PostgreSQL's sessions at url are doing and
// waiting for, and which hold the locks others wait for: for a worker
// that hangs in a database call.
func pgActivity(url string) func() string {
	return func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return fmt.Sprintf("\npg_stat_activity: %v\n", err)
		}
		defer conn.Close(ctx)
		rows, err := conn.Query(ctx, `SELECT pid, coalesce(state, ''), coalesce(wait_event_type || '/' || wait_event, ''), pg_blocking_pids(pid)::text, left(query, 200)
			FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()`)
		if err != nil {
			return fmt.Sprintf("\npg_stat_activity: %v\n", err)
		}
		defer rows.Close()
		out := "\nPostgreSQL sessions (pid, state, waiting for, blocked by, query):\n"
		for rows.Next() {
			var pid int32
			var state, wait, blockers, query string
			if err := rows.Scan(&pid, &state, &wait, &blockers, &query); err != nil {
				return out + err.Error() + "\n"
			}
			out += fmt.Sprintf("  %d %s %s %s %q\n", pid, state, wait, blockers, query)
		}
		return out
	}
}

// stopped reports whether process pid is stopped (state T in /proc).
func stopped(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] == "T"
}

// The order-queue story with real processes, a real fenced server and a
// real PostgreSQL: worker A claims an order and is stopped past its
// visibility timeout; worker B processes every order, A's among them with
// a higher token; A resumes and its late database write (postgres guard)
// and late ack (fenced) are both rejected. Every order is in the database
// once, written once.
func TestOrderQueue(t *testing.T) {
	pg, err := testdb.StartPostgres()
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Stop()
	srv := proctest.StartServer(t)
	const orders = 6
	ep := "--endpoints=" + srv.Addr

	p1 := start(t, "produce", ep, fmt.Sprint("--orders=", orders))
	p1.wait(t, time.Minute)
	p2 := start(t, "produce", ep, fmt.Sprint("--orders=", orders)) // a producer's retry
	p2.wait(t, time.Minute)
	if got := strings.Count(p2.output(), "already queued"); got != orders {
		t.Fatalf("the second producer run enqueued again:\n%s", p2.output())
	}

	a := start(t, "work", ep, "--pg="+pg.URL, "--name=A", "--visibility=1s", "--max-items=1", "--stop-after-first-claim")
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(a.output(), "pausing") || !stopped(a.cmd.Process.Pid) {
		if time.Now().After(deadline) {
			t.Fatalf("worker A did not claim and stop:\n%s", a.output())
		}
		time.Sleep(10 * time.Millisecond)
	}
	b := start(t, "work", ep, "--pg="+pg.URL, "--name=B", "--visibility=10s", fmt.Sprint("--max-items=", orders))
	b.wait(t, 2*time.Minute, pgActivity(pg.URL))
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	a.wait(t, time.Minute)
	t.Logf("worker A:\n%s\nworker B:\n%s", a.output(), b.output())

	outA := a.output()
	for _, want := range []string{"claimed orders/1 (order-1) token ", "rejected by the database guard: required token ", "ack of orders/1 with token ", "rejected by fenced"} {
		if !strings.Contains(outA, want) {
			t.Errorf("worker A's output lacks %q", want)
		}
	}
	if strings.Contains(outA, "A: wrote") || strings.Contains(outA, "A: acked") {
		t.Errorf("worker A's late write or ack was accepted:\n%s", outA)
	}
	if !strings.Contains(b.output(), "claimed orders/1 (order-1) token ") || !strings.Contains(b.output(), "delivery 2") {
		t.Errorf("worker B did not take over order-1 as its second delivery:\n%s", b.output())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	rows, err := pool.Query(ctx, "SELECT id, worker, writes FROM orders ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id, worker string
		var writes int
		if err := rows.Scan(&id, &worker, &writes); err != nil {
			t.Fatal(err)
		}
		n++
		if worker != "B" || writes != 1 {
			t.Errorf("order %s: written %d times, last by %s; want once, by B", id, writes, worker)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != orders {
		t.Fatalf("%d orders in the database, want %d", n, orders)
	}
}
