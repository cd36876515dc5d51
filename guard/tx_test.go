package guard_test

import (
	"context"
	"errors"
	"testing"

	"github.com/fenced-dev/fenced/guard"
)

type fakeTx struct{ id int }

func TestTx(t *testing.T) {
	ctx := guard.WithTx(context.Background(), &fakeTx{1})
	if tx, ok := guard.TxFrom[*fakeTx](ctx); !ok || tx.id != 1 {
		t.Fatalf("TxFrom=%v, %v; want tx 1", tx, ok)
	}
	if tx, ok := guard.TxFrom[*fakeTx](context.Background()); ok || tx != nil {
		t.Fatalf("TxFrom(no tx)=%v, %v; want nil, false", tx, ok)
	}
	// Transactions of other types are kept apart.
	if s, ok := guard.TxFrom[string](ctx); ok || s != "" {
		t.Fatalf("TxFrom[string]=%q, %v; want none", s, ok)
	}

	if guard.TxFunc[*fakeTx](nil) != nil {
		t.Fatal("TxFunc(nil) is not nil: a nil fn must give a bare check")
	}
	boom := errors.New("boom")
	var got *fakeTx
	apply := guard.TxFunc(func(tx *fakeTx) error { got = tx; return boom })
	if err := apply(ctx); err != boom || got == nil || got.id != 1 {
		t.Fatalf("apply=%v with tx %v, want fn's error and tx 1", err, got)
	}
}
