package guardtest

import (
	"context"
	"errors"
	"testing"

	fence "github.com/fenced-dev/fenced"
)

// Guard is a fence.Guard as RunGuard drives it.
type Guard struct {
	// Guard is the guard under test.
	Guard fence.Guard
	// Watermark returns an object's watermark (0 if none), read from the
	// guard's store.
	Watermark func(ctx context.Context, object string) (fence.Token, error)
	// KeepsWatermarkOnError is set for a guard that raises the watermark
	// before apply and keeps it when apply fails, the exception
	// fence.Guard allows to a store that cannot undo apply's writes
	// (filefence).
	KeepsWatermarkOnError bool
	// FlatNames is set for a guard whose objects cannot contain "/" (a
	// directory's file names, filefence): RunSigned then does not write
	// an object below a grant's scope.
	FlatNames bool
}

// mark returns obj's watermark, failing t when it cannot be read.
func (g Guard) mark(t *testing.T, obj string) fence.Token {
	t.Helper()
	m, err := g.Watermark(ctx(t), obj)
	if err != nil {
		t.Fatalf("Watermark(%q): %v", obj, err)
	}
	return m
}

// RunGuard checks the contract of fence.Guard's Do that holds whatever
// apply writes: apply runs once, only for an accepted token, with a
// context derived from Do's; its error comes back unchanged and (unless
// KeepsWatermarkOnError) leaves the watermark where it was; a nil apply
// is a bare check that raises the watermark; stale and invalid tokens are
// refused with the fence errors. Run, with a Target that writes through
// Do, checks the atomicity of the writes themselves.
func RunGuard(t *testing.T, g Guard) {
	type key struct{}
	mark := g.mark

	t.Run("Apply", func(t *testing.T) {
		obj := object(t)
		calls := 0
		c := context.WithValue(ctx(t), key{}, "from Do's caller")
		err := g.Guard.Do(c, obj, 5, func(ac context.Context) error {
			calls++
			if v, _ := ac.Value(key{}).(string); v != "from Do's caller" {
				t.Errorf("apply's context does not derive from Do's: value %q", v)
			}
			return nil
		})
		if err != nil || calls != 1 {
			t.Fatalf("Do(5)=%v after %d calls of apply, want nil after 1", err, calls)
		}
		if m := mark(t, obj); m != 5 {
			t.Fatalf("watermark=%d after Do(5), want 5", m)
		}
	})

	t.Run("NilApply", func(t *testing.T) {
		obj := object(t)
		if err := g.Guard.Do(ctx(t), obj, 7, nil); err != nil {
			t.Fatalf("Do(7, nil)=%v", err)
		}
		if m := mark(t, obj); m != 7 {
			t.Fatalf("watermark=%d after Do(7, nil), want 7", m)
		}
		var se *fence.StaleTokenError
		if err := g.Guard.Do(ctx(t), obj, 6, nil); !errors.As(err, &se) || se.Presented != 6 || se.Required != 7 || se.Object != obj {
			t.Fatalf("Do(6, nil)=%v, want StaleTokenError{%q, 6, 7}", err, obj)
		}
	})

	t.Run("Refused", func(t *testing.T) {
		obj := object(t)
		if err := g.Guard.Do(ctx(t), obj, 10, nil); err != nil {
			t.Fatal(err)
		}
		called := false
		apply := func(context.Context) error { called = true; return nil }
		var se *fence.StaleTokenError
		if err := g.Guard.Do(ctx(t), obj, 9, apply); !errors.As(err, &se) || !errors.Is(err, fence.ErrStaleToken) || se.Presented != 9 || se.Required != 10 {
			t.Errorf("Do(9)=%v, want StaleTokenError{Presented: 9, Required: 10}", err)
		}
		for _, tok := range []fence.Token{0, fence.MaxToken + 1} {
			if err := g.Guard.Do(ctx(t), obj, tok, apply); !errors.Is(err, fence.ErrInvalidToken) {
				t.Errorf("Do(token %d)=%v, want fence.ErrInvalidToken", uint64(tok), err)
			}
		}
		if called {
			t.Error("Do called apply for a refused token")
		}
		if m := mark(t, obj); m != 10 {
			t.Fatalf("watermark=%d after refused calls, want 10", m)
		}
	})

	t.Run("ApplyFails", func(t *testing.T) {
		obj := object(t)
		if err := g.Guard.Do(ctx(t), obj, 3, nil); err != nil {
			t.Fatal(err)
		}
		boom := errors.New("apply failed")
		if err := g.Guard.Do(ctx(t), obj, 8, func(context.Context) error { return boom }); err != boom {
			t.Fatalf("Do=%v, want apply's error unchanged", err)
		}
		want := fence.Token(3)
		if g.KeepsWatermarkOnError {
			want = 8
		}
		if m := mark(t, obj); m != want {
			t.Fatalf("watermark=%d after a failed apply, want %d", m, want)
		}
	})
}
