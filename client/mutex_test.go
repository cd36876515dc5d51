package client_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/bounded"
	"github.com/fenced-dev/fenced/internal/testserver"
)

func TestMutex_TryLockUnlock(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, []string{srv.Addr()})
	s1, s2 := newSession(t, c), newSession(t, c)
	ctx := testCtx(t)

	m1 := client.NewMutex(s1, "basics")
	if err := m1.Context().Err(); err == nil {
		t.Errorf("Context() before Lock is not cancelled")
	}
	if got := m1.Token(); got != 0 {
		t.Errorf("Token() before Lock = %v, want 0", got)
	}
	if err := m1.TryLock(ctx); err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	tok1 := m1.Token()
	if !tok1.Valid() {
		t.Fatalf("Token() = %v, want a valid token", tok1)
	}
	g := m1.Grant()
	if g.Name != "basics" || g.Token != tok1 || g.Session != s1.ID() || g.Issuer == "" || g.TTL != s1.TTL() {
		t.Errorf("Grant() = %+v, want name basics, token %v, session %d, an issuer and TTL %v", g, tok1, s1.ID(), s1.TTL())
	}
	gctx := m1.Context()
	if err := gctx.Err(); err != nil {
		t.Fatalf("Context() of a held lock: %v", err)
	}
	// Locking again while held is a no-op.
	if err := m1.Lock(ctx); err != nil || m1.Token() != tok1 {
		t.Errorf("Lock() while held = %v, token %v; want nil, token %v", err, m1.Token(), tok1)
	}

	m2 := client.NewMutex(s2, "basics")
	if err := m2.TryLock(ctx); !errors.Is(err, fence.ErrNotGranted) {
		t.Fatalf("TryLock by a second session = %v, want fence.ErrNotGranted", err)
	}
	if got := m2.Token(); got != 0 {
		t.Errorf("Token() after a failed TryLock = %v, want 0", got)
	}

	if err := m1.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if err := context.Cause(gctx); !errors.Is(err, client.ErrNotHeld) {
		t.Errorf("Context() cause after Unlock = %v, want client.ErrNotHeld", err)
	}
	if got := m1.Token(); got != 0 {
		t.Errorf("Token() after Unlock = %v, want 0", got)
	}
	// Unlocking again is fine: the lock is already released.
	if err := m1.Unlock(ctx); err != nil {
		t.Errorf("second Unlock: %v", err)
	}

	if err := m2.TryLock(ctx); err != nil {
		t.Fatalf("TryLock after Unlock: %v", err)
	}
	if tok2 := m2.Token(); tok2 <= tok1 {
		t.Errorf("second grant's Token() = %v, want > %v", tok2, tok1)
	}
	// Unlock by a session that does not hold it.
	if err := m1.Unlock(ctx); !errors.Is(err, client.ErrNotOwned) {
		t.Errorf("Unlock of a lock held by another session = %v, want client.ErrNotOwned", err)
	}
	if err := m2.Context().Err(); err != nil {
		t.Errorf("holder's Context() after another session's Unlock: %v", err)
	}
}

// TestMutex_LockFIFO checks that waiters are granted in arrival order with
// strictly increasing tokens, each when the one before unlocks.
func TestMutex_LockFIFO(t *testing.T) {
	srv := testserver.Start(t)
	api := lockAPI(srv.Addr())
	c := newClient(t, []string{srv.Addr()})
	ctx := testCtx(t)
	const name = "fifo"

	holder := client.NewMutex(newSession(t, c), name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}

	type result struct {
		waiter int
		token  fence.Token
		err    error
	}
	var (
		mu    sync.Mutex
		order []result
		wg    sync.WaitGroup
	)
	const n = 3
	for i := range n {
		m := client.NewMutex(newSession(t, c), name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := m.Lock(ctx)
			mu.Lock()
			order = append(order, result{i, m.Token(), err})
			mu.Unlock()
			if err == nil {
				m.Unlock(ctx)
			}
		}()
		// Let waiter i queue before waiter i+1 arrives.
		eventually(t, "waiter queued", func() bool { return len(waiters(t, api, name)) == i+1 })
	}

	if err := holder.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	bounded.Wait(t, "waiters", bound, &wg)
	prev := holder.Grant().Token
	if len(order) != n {
		t.Fatalf("%d waiters done, want %d", len(order), n)
	}
	first := fence.Token(0)
	for i, r := range order {
		if r.err != nil {
			t.Fatalf("waiter %d: Lock: %v", r.waiter, r.err)
		}
		if r.waiter != i {
			t.Errorf("grant %d went to waiter %d, want %d (arrival order)", i, r.waiter, i)
		}
		if r.token <= first || r.token <= prev {
			t.Errorf("grant %d: token %v, want above %v", i, r.token, max(first, prev))
		}
		first = r.token
	}
}

// TestMutex_LockCancel checks that a Lock whose context ends while it
// waits returns the context's error and leaves the lock to others.
func TestMutex_LockCancel(t *testing.T) {
	srv := testserver.Start(t)
	api := lockAPI(srv.Addr())
	c := newClient(t, []string{srv.Addr()})
	const name = "cancel"

	holder := client.NewMutex(newSession(t, c), name)
	if err := holder.Lock(testCtx(t)); err != nil {
		t.Fatalf("Lock: %v", err)
	}

	// Deadline: the server answers "not granted" before it.
	waiter := client.NewMutex(newSession(t, c), name)
	ctx, cancel := context.WithTimeout(testCtx(t), 300*time.Millisecond)
	defer cancel()
	if err := waiter.Lock(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Lock with a deadline = %v, want context.DeadlineExceeded", err)
	}

	// Cancellation while the call waits.
	ctx, cancel = context.WithCancel(testCtx(t))
	done := make(chan error, 1)
	go func() { done <- waiter.Lock(ctx) }()
	eventually(t, "waiter queued", func() bool { return len(waiters(t, api, name)) == 1 })
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled Lock = %v, want context.Canceled", err)
		}
	case <-time.After(bound):
		t.Fatalf("cancelled Lock did not return within %v", bound)
	}
	if w := waiters(t, api, name); len(w) != 0 {
		t.Errorf("waiters after the cancelled Lock: %v, want none", w)
	}
	if err := waiter.Context().Err(); err == nil {
		t.Errorf("Context() after a cancelled Lock is not cancelled")
	}

	// The lock goes to the next session, not to the cancelled waiter.
	if err := holder.Unlock(testCtx(t)); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if err := client.NewMutex(newSession(t, c), name).TryLock(testCtx(t)); err != nil {
		t.Errorf("TryLock after the holder unlocked: %v", err)
	}
}

// TestMutex_SessionClose checks that closing a session cancels its grants'
// contexts and releases its locks.
func TestMutex_SessionClose(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, []string{srv.Addr()})
	s := newSession(t, c)
	m := client.NewMutex(s, "session-close")
	if err := m.Lock(testCtx(t)); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	gctx := m.Context()
	if err := s.Close(testCtx(t)); err != nil {
		t.Fatalf("Close: %v", err)
	}
	within(t, "Done after Close", s.Done())
	if err := s.Err(); !errors.Is(err, client.ErrSessionClosed) {
		t.Errorf("Err() = %v, want client.ErrSessionClosed", err)
	}
	if err := context.Cause(gctx); !errors.Is(err, client.ErrSessionClosed) {
		t.Errorf("grant Context() cause = %v, want client.ErrSessionClosed", err)
	}
	if st := s.State(); st != client.StateLost {
		t.Errorf("State() = %v, want %v", st, client.StateLost)
	}
	if err := m.Unlock(testCtx(t)); err != nil {
		t.Errorf("Unlock after Close: %v", err)
	}
	if err := m.Lock(testCtx(t)); !errors.Is(err, client.ErrSessionClosed) {
		t.Errorf("Lock after Close = %v, want client.ErrSessionClosed", err)
	}
	// The server released the lock.
	if err := client.NewMutex(newSession(t, c), "session-close").TryLock(testCtx(t)); err != nil {
		t.Errorf("TryLock after the holder's session closed: %v", err)
	}
	if err := s.Close(testCtx(t)); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
