package guard_test

import (
	"context"
	"errors"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
)

func TestTokenFrom(t *testing.T) {
	if o, tok, ok := guard.TokenFrom(context.Background()); ok || o != "" || tok != 0 {
		t.Fatalf("TokenFrom(no fence)=%q, %d, %v; want \"\", 0, false", o, tok, ok)
	}
	ctx := guard.WithFence(context.Background(), "obj", 7, nil)
	if o, tok, ok := guard.TokenFrom(ctx); !ok || o != "obj" || tok != 7 {
		t.Fatalf("TokenFrom()=%q, %d, %v; want obj, 7, true", o, tok, ok)
	}
}

func TestDo_Errors(t *testing.T) {
	called := false
	apply := func(context.Context) error { called = true; return nil }
	if err := guard.Do(context.Background(), apply); !errors.Is(err, guard.ErrNoFence) {
		t.Errorf("Do without a fence=%v, want ErrNoFence", err)
	}
	if err := guard.Do(guard.WithFence(context.Background(), "obj", 1, nil), apply); !errors.Is(err, guard.ErrNoGuard) {
		t.Errorf("Do without a guard=%v, want ErrNoGuard", err)
	}
	if called {
		t.Error("apply ran although Do failed")
	}
}

func TestDo_Memory(t *testing.T) {
	var marks guard.Memory
	errDisk := errors.New("disk full")
	for _, st := range []struct {
		name  string
		token fence.Token
		apply error
		want  error // matched with errors.Is; nil for accepted
		mark  fence.Token
	}{
		{"first write", 5, nil, nil, 5},
		{"apply fails", 8, errDisk, errDisk, 5},
		{"stale", 4, nil, fence.ErrStaleToken, 5},
		{"invalid", 0, nil, fence.ErrInvalidToken, 5},
		{"higher", 9, nil, nil, 9},
	} {
		t.Run(st.name, func(t *testing.T) {
			ctx := guard.WithFence(context.Background(), "obj", st.token, &marks)
			ran := false
			err := guard.Do(ctx, func(context.Context) error { ran = true; return st.apply })
			if st.want == nil && err != nil || st.want != nil && !errors.Is(err, st.want) {
				t.Fatalf("Do(token %d)=%v, want %v", st.token, err, st.want)
			}
			if st.apply != nil && err != st.apply {
				t.Errorf("Do=%v, want apply's error unchanged", err)
			}
			if wantRan := st.want == nil || st.apply != nil; ran != wantRan {
				t.Errorf("apply ran=%v, want %v", ran, wantRan)
			}
			if got := marks.Watermark("obj"); got != st.mark {
				t.Errorf("Watermark()=%d, want %d", got, st.mark)
			}
		})
	}
}

// TestDo_GuardContext checks that apply gets the context the guard passes
// (a transaction, say) and that the fence is still in it.
func TestDo_GuardContext(t *testing.T) {
	type txKey struct{}
	g := fence.GuardFunc(func(ctx context.Context, object string, tok fence.Token, apply func(context.Context) error) error {
		return apply(context.WithValue(ctx, txKey{}, "tx-1"))
	})
	ctx := guard.WithFence(context.Background(), "obj", 3, g)
	err := guard.Do(ctx, func(ctx context.Context) error {
		if tx, _ := ctx.Value(txKey{}).(string); tx != "tx-1" {
			t.Errorf("apply's context has tx %q, want the guard's tx-1", tx)
		}
		if o, tok, ok := guard.TokenFrom(ctx); !ok || o != "obj" || tok != 3 {
			t.Errorf("TokenFrom(apply's context)=%q, %d, %v; want obj, 3, true", o, tok, ok)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDo_Nested checks that a Do inside apply runs its apply directly: the
// check is already held, and Memory's lock is not reentrant.
func TestDo_Nested(t *testing.T) {
	var marks guard.Memory
	ctx := guard.WithFence(context.Background(), "obj", 5, &marks)
	done := make(chan error, 1)
	inner := false
	go func() {
		done <- guard.Do(ctx, func(ctx context.Context) error {
			return guard.Do(ctx, func(context.Context) error { inner = true; return nil })
		})
	}()
	select {
	case err := <-done:
		if err != nil || !inner {
			t.Fatalf("nested Do=%v, inner apply ran=%v; want nil, true", err, inner)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nested Do deadlocked")
	}
	if got := marks.Watermark("obj"); got != 5 {
		t.Errorf("Watermark()=%d, want 5", got)
	}
}
