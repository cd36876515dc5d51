package outbox_test

import (
	"errors"
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
	"github.com/fenced-dev/fenced/guard/guardtest"
	"github.com/fenced-dev/fenced/outbox"
)

func TestIdempotencyKey(t *testing.T) {
	for _, tt := range []struct {
		resource string
		token    fence.Token
		want     string
	}{
		{"invoice-42/charge", 7, "invoice-42/charge:7"},
		{"a:b", 1, "a:b:1"},
		{"r", fence.MaxToken, "r:9223372036854775807"},
	} {
		if got := outbox.IdempotencyKey(tt.resource, tt.token); got != tt.want {
			t.Errorf("IdempotencyKey(%q, %d)=%q, want %q", tt.resource, tt.token, got, tt.want)
		}
	}
}

func TestGuard_Before(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	g := outbox.NewGuard(pool)
	r := uniqueName("payment")
	key, err := g.Before(ctx, r, 5)
	if err != nil || key != r+":5" {
		t.Fatalf("Before(5)=%q, %v; want %q", key, err, r+":5")
	}
	if key, err := g.Before(ctx, r, 5); err != nil || key != r+":5" {
		t.Fatalf("Before(5) again=%q, %v; want the same key", key, err)
	}
	_, err = g.Before(ctx, r, 4)
	var se *fence.StaleTokenError
	if !errors.As(err, &se) || se.Presented != 4 || se.Required != 5 {
		t.Fatalf("Before(4)=%v, want StaleTokenError{Presented: 4, Required: 5}", err)
	}
	for _, tok := range []fence.Token{0, fence.MaxToken + 1} {
		if _, err := g.Before(ctx, r, tok); !errors.Is(err, fence.ErrInvalidToken) {
			t.Fatalf("Before(%d)=%v, want ErrInvalidToken", uint64(tok), err)
		}
	}
	if err := g.Check(ctx, r, 6); err != nil {
		t.Fatal(err)
	}
	if mark, err := g.Watermark(ctx, r); err != nil || mark != 6 {
		t.Fatalf("Watermark()=%d, %v; want 6", mark, err)
	}

	pinned := outbox.NewGuard(pool, outbox.WithIssuer("cluster-a"))
	if _, err := pinned.Before(ctx, r, 7); !errors.Is(err, fence.ErrIssuerMismatch) {
		t.Fatalf("pinned Before without issuer=%v, want ErrIssuerMismatch", err)
	}
	if _, err := pinned.Before(guard.ContextWithIssuer(ctx, "cluster-a"), r, 7); err != nil {
		t.Fatalf("pinned Before from cluster-a=%v", err)
	}
}

func TestGuard_Guard(t *testing.T) {
	g := outbox.NewGuard(newPool(t))
	guardtest.RunGuard(t, guardtest.Guard{Guard: g, Watermark: g.Watermark})
	t.Run("Signed", func(t *testing.T) { guardtest.RunSigned(t, guardtest.Guard{Guard: g, Watermark: g.Watermark}) })
}

// TestGuard_SharedWithDispatcher: a direct call guarded by Before raises
// the watermark the dispatcher checks, so older queued commands are
// dropped.
func TestGuard_SharedWithDispatcher(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	clearOutbox(t, ctx, pool)
	r := uniqueName("r")
	old := enqueue(t, ctx, pool, r, 7)
	if _, err := outbox.NewGuard(pool).Before(ctx, r, 9); err != nil {
		t.Fatal(err)
	}
	cur := enqueue(t, ctx, pool, r, 9)
	var recv receiver
	if _, err := fastDispatcher(recv.Deliver).Drain(ctx, newConn(t)); err != nil {
		t.Fatal(err)
	}
	if e := lookup(t, ctx, pool, old); e.State != outbox.StateDropped {
		t.Fatalf("command with token 7: %s, want dropped", e.State)
	}
	if calls := recv.Calls(); len(calls) != 1 || calls[0].ID != cur {
		t.Fatalf("calls=%+v, want only the token-9 command", calls)
	}
}
