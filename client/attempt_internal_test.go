package client

import (
	"context"
	"errors"
	"testing"
	"time"
)

// An attempt's context behaves as the context.WithTimeout it replaces for
// anything that uses it as a context: Done closes at the deadline or with
// the parent, Err says which, a derived context ends with it, and end
// cancels it as a WithTimeout's cancel does.
func TestAttemptCtx_BehavesAsWithTimeout(t *testing.T) {
	t.Run("deadline without Done", func(t *testing.T) {
		a := newAttempt(context.Background(), 30*time.Millisecond)
		defer a.end()
		if err := a.Err(); err != nil {
			t.Fatalf("Err before the deadline = %v", err)
		}
		time.Sleep(40 * time.Millisecond)
		if err := a.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Err after the deadline = %v, want DeadlineExceeded", err)
		}
	})
	t.Run("Done closes at the deadline", func(t *testing.T) {
		start := time.Now()
		a := newAttempt(context.Background(), 30*time.Millisecond)
		defer a.end()
		select {
		case <-a.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("Done not closed 10 s after a 30 ms deadline")
		}
		if time.Since(start) < 30*time.Millisecond || !errors.Is(a.Err(), context.DeadlineExceeded) {
			t.Fatalf("Done after %v with Err %v, want at 30 ms or later with DeadlineExceeded", time.Since(start), a.Err())
		}
	})
	t.Run("parent ends", func(t *testing.T) {
		parent, cancel := context.WithCancelCause(context.Background())
		a := newAttempt(parent, time.Hour)
		defer a.end()
		done := a.Done()
		derived, stop := context.WithCancel(a)
		defer stop()
		cause := errors.New("the caller gave up")
		cancel(cause)
		for _, ch := range []<-chan struct{}{done, derived.Done()} {
			select {
			case <-ch:
			case <-time.After(10 * time.Second):
				t.Fatal("not ended with the parent")
			}
		}
		if !errors.Is(a.Err(), context.Canceled) || !errors.Is(context.Cause(derived), cause) {
			t.Fatalf("Err %v, derived's cause %v: want Canceled and the parent's cause", a.Err(), context.Cause(derived))
		}
	})
	t.Run("derived ends at the deadline", func(t *testing.T) {
		a := newAttempt(context.Background(), 30*time.Millisecond)
		defer a.end()
		derived, stop := context.WithCancel(a)
		defer stop()
		select {
		case <-derived.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("a context derived from the attempt did not end at its deadline")
		}
		if !errors.Is(context.Cause(derived), context.DeadlineExceeded) {
			t.Fatalf("derived's cause %v, want DeadlineExceeded", context.Cause(derived))
		}
	})
	t.Run("end", func(t *testing.T) {
		a := newAttempt(context.Background(), time.Hour)
		done := a.Done()
		a.end()
		select {
		case <-done:
		default:
			t.Fatal("Done made before end is open after end")
		}
		b := newAttempt(context.Background(), time.Hour)
		b.end()
		if !errors.Is(b.Err(), context.Canceled) {
			t.Fatalf("Err after end = %v, want Canceled", b.Err())
		}
		select {
		case <-b.Done():
		default:
			t.Fatal("Done made after end is open")
		}
	})
	t.Run("deadline is the earlier", func(t *testing.T) {
		parent, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		pd, _ := parent.Deadline()
		a := newAttempt(parent, time.Hour)
		if d, ok := a.Deadline(); !ok || !d.Equal(pd) {
			t.Fatalf("Deadline %v %v, want the parent's %v", d, ok, pd)
		}
		b := newAttempt(parent, time.Second)
		if d, ok := b.Deadline(); !ok || !d.Before(pd) {
			t.Fatalf("Deadline %v %v, want the attempt's, before %v", d, ok, pd)
		}
		if done, dl := attemptOf(b); done != parent.Done() || dl.IsZero() {
			t.Fatalf("attemptOf: the parent's Done and the deadline, got %v %v", done, dl)
		}
	})
}
