package pggrant_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/pggrant"
	"github.com/fenced-dev/fenced/postgres"
)

// The holder process: the test binary run with holderEnv set to a DSN.
// It acquires the lock named by holderNameEnv with a TTL of 1s, prints
// "token N", and on each line "write" from stdin writes "holder" to the
// object holderNameEnv through the postgres guard with that token,
// printing "ok" or "stale".
const (
	holderEnv     = "PGGRANT_TEST_HOLDER"
	holderNameEnv = "PGGRANT_TEST_HOLDER_NAME"
)

func runHolder() int {
	ctx := context.Background()
	dsn, name := os.Getenv(holderEnv), os.Getenv(holderNameEnv)
	g, err := pggrant.Open(ctx, dsn)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	h, err := g.Acquire(ctx, name, fence.WithTTL(time.Second))
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	tok := h.Grant().Token
	fmt.Println("token", tok)
	guard := postgres.New(pool)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		// Write without looking at the grant first, as a process that was
		// paused between its check and its write does.
		err := guard.InTx(ctx, name, tok, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO pggrant_test_values (object, value) VALUES ($1, 'holder')
				ON CONFLICT (object) DO UPDATE SET value = 'holder'`, name)
			return err
		})
		switch {
		case err == nil:
			fmt.Println("ok")
		case errors.Is(err, fence.ErrStaleToken):
			fmt.Println("stale")
		default:
			fmt.Println("error:", err)
		}
	}
	return 0
}

// A holder process stopped with SIGSTOP past its TTL loses the lock to
// the next holder, and when it continues, its write with the old token is
// rejected by the postgres guard: the next holder's write stands.
func TestGrantor_SIGSTOPHolderFenced(t *testing.T) {
	ctx := testCtx(t)
	pool, err := pgxpool.New(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	guard := postgres.New(pool)
	if err := guard.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS pggrant_test_values (object text PRIMARY KEY, value text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("sigstop-%d", time.Now().UnixNano())

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holderEnv+"="+pg.URL, holderNameEnv+"="+name)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	lines := bufio.NewScanner(stdout)
	line := func() string {
		if !lines.Scan() {
			t.Fatalf("holder process ended: %v", lines.Err())
		}
		return lines.Text()
	}
	var t1 fence.Token
	if l := line(); !strings.HasPrefix(l, "token ") {
		t.Fatalf("holder said %q; want its token", l)
	} else if t1, err = fence.ParseToken(strings.TrimPrefix(l, "token ")); err != nil {
		t.Fatal(err)
	}

	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	g := open(t, pgAddr())
	h, err := g.Acquire(ctx, name, fence.Wait())
	if err != nil {
		t.Fatal(err)
	}
	t2 := h.Grant().Token
	if t2 <= t1 {
		t.Fatalf("next holder's token %d is not above the stopped holder's %d", t2, t1)
	}
	t.Logf("granted to the next holder %v after the SIGSTOP (holder's TTL 1s)", time.Since(stopped))
	err = guard.InTx(ctx, name, t2, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO pggrant_test_values (object, value) VALUES ($1, 'next holder')
			ON CONFLICT (object) DO UPDATE SET value = 'next holder'`, name)
		return err
	})
	if err != nil {
		t.Fatalf("next holder's write: %v", err)
	}

	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(stdin, "write")
	if l := line(); l != "stale" {
		t.Fatalf("the continued holder's write with token %d: %q; want stale", t1, l)
	}
	var value string
	if err := pool.QueryRow(ctx, `SELECT value FROM pggrant_test_values WHERE object = $1`, name).Scan(&value); err != nil || value != "next holder" {
		t.Fatalf("value = %q, %v; want the next holder's", value, err)
	}
	if res, err := h.Release(ctx); err != nil || res != fence.Released {
		t.Fatalf("release = %q, %v", res, err)
	}
}
