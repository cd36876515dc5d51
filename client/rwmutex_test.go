package client_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/bounded"
	"github.com/fenced-dev/fenced/internal/testserver"
)

type rwResult struct {
	g   *client.RWGrant
	err error
}

func rwAsync(ctx context.Context, f func(context.Context) (*client.RWGrant, error)) <-chan rwResult {
	ch := make(chan rwResult, 1)
	go func() {
		g, err := f(ctx)
		ch <- rwResult{g, err}
	}()
	return ch
}

// waitWaiters waits until the server's queue of name is want.
func waitWaiters(t *testing.T, c *client.Client, name string, want []client.RWWaiter) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		st, err := c.DescribeRWLock(testCtx(t), name)
		if err != nil {
			t.Fatalf("DescribeRWLock: %v", err)
		}
		if slices.Equal(st.Waiters, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiters of %q = %v, want %v", name, st.Waiters, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Readers share the lock; a writer waits for them and holds back a reader
// that came after it; the writer's token is above the readers'; each
// grant's Context ends with Unlock; the pushed grants arrive without
// polling.
func TestRWMutex_FairReadersAndWriter(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, []string{srv.Addr()})
	ctx := testCtx(t)
	r1, r2, w, r3 := newSession(t, c), newSession(t, c), newSession(t, c), newSession(t, c)

	m1, m2 := client.NewRWMutex(r1, "db"), client.NewRWMutex(r2, "db")
	g1, err := m1.RLock(ctx)
	if err != nil {
		t.Fatalf("RLock: %v", err)
	}
	g2, err := m2.TryRLock(ctx)
	if err != nil {
		t.Fatalf("second reader: %v", err)
	}
	if g1.Grant().Kind != fence.KindRead || g1.Grant().Scope != "db" || g1.Write() || g2.Token() <= g1.Token() {
		t.Fatalf("read grants %+v, %+v; want kind read, scope db, each its own rising token", g1.Grant(), g2.Grant())
	}
	if again, err := m1.RLock(ctx); err != nil || again != g1 {
		t.Fatalf("RLock while holding = %v, %v; want the same grant", again, err)
	}

	mw := client.NewRWMutex(w, "db")
	if _, err := mw.TryLock(ctx); !errors.Is(err, fence.ErrNotGranted) {
		t.Fatalf("TryLock beside readers = %v, want fence.ErrNotGranted", err)
	}
	writer := rwAsync(ctx, mw.Lock)
	waitWaiters(t, c, "db", []client.RWWaiter{{Session: w.ID(), Write: true}})
	m3 := client.NewRWMutex(r3, "db")
	if _, err := m3.TryRLock(ctx); !errors.Is(err, fence.ErrNotGranted) {
		t.Fatalf("TryRLock behind a waiting writer = %v, want fence.ErrNotGranted", err)
	}
	reader := rwAsync(ctx, m3.RLock)
	waitWaiters(t, c, "db", []client.RWWaiter{{Session: w.ID(), Write: true}, {Session: r3.ID()}})

	if err := m1.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if cause := g1.Err(); !errors.Is(cause, client.ErrNotHeld) {
		t.Fatalf("grant Err after Unlock = %v, want ErrNotHeld", cause)
	}
	if err := m2.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	wr := bounded.Recv(t, "the writer's grant", bound, writer)
	if wr.err != nil || !wr.g.Write() || wr.g.Token() <= g2.Token() {
		t.Fatalf("writer = %+v, want a write grant above token %d", wr, g2.Token())
	}
	select {
	case r := <-reader:
		t.Fatalf("the reader behind the writer was admitted beside it: %+v", r)
	default:
	}
	if err := mw.Unlock(ctx); err != nil {
		t.Fatalf("writer Unlock: %v", err)
	}
	rr := bounded.Recv(t, "the last reader's grant", bound, reader)
	if rr.err != nil || rr.g.Token() <= wr.g.Token() {
		t.Fatalf("last reader = %+v, want a grant above the writer's %d", rr, wr.g.Token())
	}
	select {
	case <-wr.g.Done():
	default:
		t.Fatal("the writer's Done is open after Unlock")
	}
}

// No upgrade: a reader asking for the write grant is refused at once, and
// keeps its read grant.
func TestRWMutex_NoUpgrade(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, []string{srv.Addr()})
	ctx := testCtx(t)
	s := newSession(t, c)
	m := client.NewRWMutex(s, "up")
	g, err := m.RLock(ctx)
	if err != nil {
		t.Fatalf("RLock: %v", err)
	}
	if _, err := m.Lock(ctx); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Fatalf("Lock while holding a read grant = %v, want fence.ErrInvalidArgument", err)
	}
	// Another RWMutex of the same session asks the server, which refuses too.
	if _, err := client.NewRWMutex(s, "up").Lock(ctx); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Fatalf("server-side upgrade = %v, want fence.ErrInvalidArgument", err)
	}
	if g.Err() != nil {
		t.Fatalf("the read grant ended: %v", g.Err())
	}
}

// A wait given up (ctx ended) leaves nothing queued, so the writer does not
// hold back the readers after it.
func TestRWMutex_AbandonedWaitWithdrawn(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, []string{srv.Addr()})
	ctx := testCtx(t)
	r, w, r2 := newSession(t, c), newSession(t, c), newSession(t, c)
	if _, err := client.NewRWMutex(r, "wd").RLock(ctx); err != nil {
		t.Fatalf("RLock: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if _, err := client.NewRWMutex(w, "wd").Lock(wctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock that ran out = %v, want context.DeadlineExceeded", err)
	}
	waitWaiters(t, c, "wd", nil)
	if _, err := client.NewRWMutex(r2, "wd").TryRLock(ctx); err != nil {
		t.Fatalf("reader after the writer gave up: %v", err)
	}
}

// A grant's Context ends when its session is closed.
func TestRWMutex_SessionEndCancelsGrant(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, []string{srv.Addr()})
	ctx := testCtx(t)
	s := newSession(t, c)
	g, err := client.NewRWMutex(s, "end").Lock(ctx)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	bounded.Recv(t, "the grant's Done", bound, g.Done())
	st, err := c.DescribeRWLock(ctx, "end")
	if err != nil || st.Writer.Token != 0 {
		t.Fatalf("after Close: %+v, %v; want no writer", st, err)
	}
}
