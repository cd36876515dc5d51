package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/bench"
)

// TestMain lets the test binary act as `compare candidate`, the process
// the election-failover measurement starts and kills.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "candidate" {
		if err := candidateMain(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "candidate:", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(m.Run())
}

// launchFor starts a real server of target name for t.
func launchFor(t *testing.T, name string) *cluster {
	t.Helper()
	tmp := t.TempDir()
	e := env{tmp: tmp}
	tg, _ := targetByName(name)
	if tg.Kind == "fenced" {
		root, err := filepath.Abs("../..")
		if err != nil {
			t.Fatal(err)
		}
		if e.fencedBin, err = buildFenced(root, tmp); err != nil {
			t.Fatal(err)
		}
	}
	c, err := launch(e, tg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.stop)
	return c
}

// lockers opens n lockers of c's system.
func lockers(t *testing.T, ctx context.Context, c *cluster, n int) []bench.Locker {
	t.Helper()
	sys, err := c.system(false, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sys.Close() })
	var out []bench.Locker
	for i := range n {
		l, err := sys.NewLocker(ctx, i, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		out = append(out, l)
	}
	return out
}

type grant struct {
	token uint64
	err   error
}

// blocked fails t if g delivers within a while (the grant should wait).
func blocked(t *testing.T, g <-chan grant, what string) {
	t.Helper()
	select {
	case r := <-g:
		t.Fatalf("%s was granted (token %d, err %v) while it should wait", what, r.token, r.err)
	case <-time.After(500 * time.Millisecond):
	}
}

// granted returns g's grant, failing t if it does not come within 10s.
func granted(t *testing.T, g <-chan grant, what string) uint64 {
	t.Helper()
	select {
	case r := <-g:
		if r.err != nil {
			t.Fatalf("%s: %v", what, r.err)
		}
		return r.token
	case <-time.After(10 * time.Second):
		t.Fatalf("%s not granted within 10s", what)
	}
	return 0
}

// TestSemaphoreRecipes checks the etcd and Redis semaphore recipes (and
// fenced's SDK semaphore) on real servers: a third holder of a semaphore
// of 2 waits until one of the first two releases, and gets a higher token.
func TestSemaphoreRecipes(t *testing.T) {
	for _, name := range []string{"etcd", "redis", "fenced"} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			ls := lockers(t, ctx, launchFor(t, name), 3)
			const sem = "test/sem"
			acquire := func(l bench.Locker) <-chan grant {
				g := make(chan grant, 1)
				go func() {
					tok, _, err := l.(bench.Semaphorer).AcquirePermit(ctx, sem, 2)
					g <- grant{tok, err}
				}()
				return g
			}
			t1 := granted(t, acquire(ls[0]), "first permit")
			granted(t, acquire(ls[1]), "second permit")
			third := acquire(ls[2])
			blocked(t, third, "a third permit of 2")
			if err := ls[0].(bench.Semaphorer).ReleasePermit(ctx, sem); err != nil {
				t.Fatal(err)
			}
			if t3 := granted(t, third, "third permit after a release"); t3 <= t1 {
				t.Fatalf("third permit's token %d is not above the released one's %d", t3, t1)
			}
		})
	}
}

// TestRWLockRecipes checks the etcd and Redis read/write lock recipes
// (and fenced's SDK RWMutex) on real servers: two readers share, a writer
// waits for both, a reader waits for the writer.
func TestRWLockRecipes(t *testing.T) {
	for _, name := range []string{"etcd", "redis", "fenced"} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			ls := lockers(t, ctx, launchFor(t, name), 3)
			const rw = "test/rw"
			lock := func(l bench.Locker, write bool) <-chan grant {
				g := make(chan grant, 1)
				go func() {
					tok, err := l.(bench.RWLocker).RWLock(ctx, rw, write)
					g <- grant{tok, err}
				}()
				return g
			}
			unlock := func(l bench.Locker) {
				t.Helper()
				if err := l.(bench.RWLocker).RWUnlock(ctx, rw); err != nil {
					t.Fatal(err)
				}
			}
			granted(t, lock(ls[0], false), "first reader")
			r2 := granted(t, lock(ls[1], false), "second reader beside the first")
			w := lock(ls[2], true)
			blocked(t, w, "a writer while two read")
			unlock(ls[0])
			blocked(t, w, "a writer while one reads")
			unlock(ls[1])
			wt := granted(t, w, "the writer once the readers left")
			if wt <= r2 {
				t.Fatalf("writer's token %d is not above the reader's %d", wt, r2)
			}
			r := lock(ls[0], false)
			blocked(t, r, "a reader while the writer holds")
			unlock(ls[2])
			granted(t, r, "a reader once the writer left")
		})
	}
}

// TestElectionFailover runs one failover on each real server: the next
// candidate leads only after the leader's process is killed, with a
// higher token, within a bound of the TTL.
func TestElectionFailover(t *testing.T) {
	for _, name := range []string{"etcd", "redis", "fenced"} {
		t.Run(name, func(t *testing.T) {
			c := launchFor(t, name)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			f, err := measureFailover(ctx, c.target.Kind, c.endpoints, 2, 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if len(f.FailoverMs) != 2 || f.TokenOrderViolations != 0 {
				t.Fatalf("failovers %v, token-order violations %d", f.FailoverMs, f.TokenOrderViolations)
			}
			for _, ms := range f.FailoverMs {
				// The session outlives its last renewal (every TTL/3)
				// by the TTL, so a failover takes about 2/3 of it or
				// more; half of it leaves room for a late renewal on a
				// loaded machine. Shorter means the next candidate did
				// not wait for the killed leader's session to end.
				if ms < 1000 || ms > 30000 {
					t.Fatalf("failover %v ms outside 1–30 s for a 2s TTL", ms)
				}
			}
			t.Logf("%s failovers %v ms", name, f.FailoverMs)
		})
	}
}
