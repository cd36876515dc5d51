package guard

import "context"

// txKey is the context key of a transaction of type T.
type txKey[T any] struct{}

// WithTx returns a context carrying tx, the transaction of a guard's
// atomic step, for the apply the guard calls with it. A guard whose step is
// a transaction (postgres, sqlfence) uses it in its Do and offers TxFrom
// for its transaction type as its own TxFromContext.
func WithTx[T any](ctx context.Context, tx T) context.Context {
	return context.WithValue(ctx, txKey[T]{}, tx)
}

// TxFrom returns the transaction of type T that WithTx put into ctx; ok is
// false when there is none.
func TxFrom[T any](ctx context.Context) (tx T, ok bool) {
	tx, ok = ctx.Value(txKey[T]{}).(T)
	return tx, ok
}

// TxFunc adapts fn, a write that takes the step's transaction, to an apply
// that takes it from its context (TxFrom); a nil fn gives a nil apply.
// Guards use it for their InTx, which is Do with TxFunc(fn).
func TxFunc[T any](fn func(tx T) error) func(ctx context.Context) error {
	if fn == nil {
		return nil
	}
	return func(ctx context.Context) error {
		tx, _ := TxFrom[T](ctx)
		return fn(tx)
	}
}
