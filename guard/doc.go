// Package guard holds what every fenced resource shares beyond the root
// package's rule (fence.Decide, fence.Guard): the checks a guard makes
// before it asks its store (Admit), an in-memory fence.Guard for tests and
// single-process resources (Memory), and the transport-independent half of
// fencing a service: the fence of a request being served and the fence a
// client sends. httpfence and grpcfence put these on the wire.
//
// # The rule
//
// Per object: a token below the highest accepted so far is rejected with a
// *fence.StaleTokenError carrying the presented and the required token; an
// equal token is accepted (repeated writes within one grant); a higher
// token is accepted and becomes the watermark. fence.Decide applies it;
// guards whose check runs in their store (SQL, Lua) implement it there
// after Admit. Memory applies it under a mutex.
//
// # One guard interface
//
// Every guard of this module implements fence.Guard, whose Do checks a
// token and runs a write in one atomic step: *Memory, *postgres.Guard and
// *sqlfence.Guard (the write runs in the transaction that raises the
// watermark), *redisfence.Guard (the write's commands are queued into a
// MULTI/EXEC guarded by WATCH), *filefence.Dir (the write runs under the
// name's lock) and *outbox.Guard. Each guard's documentation says what its
// apply may do and how it reaches the guard's transaction.
//
// # Serving fenced requests
//
// A transport layer (the httpfence middleware, the grpcfence interceptors)
// parses a request's token, object and issuer with ParsePresented (each
// sent at most once: a repeated field is refused, never resolved to its
// first or last copy) and hands the handler a context made by WithFence
// and ContextWithIssuer. The handler makes its
// write through Do, which runs it inside the fence.Guard's atomic step, so
// the check, the write and the raise of the watermark cannot interleave
// with another request's:
//
//	err := guard.Do(ctx, func(ctx context.Context) error {
//		return orders.Put(id, order) // the write, under the check
//	})
//
// The same handler code serves HTTP and gRPC. A handler that writes
// through a guard of its own takes the token from TokenFrom instead. Mode
// says whether the handler calls Do (InHandler) or the transport runs the
// whole handler inside it (AroundHandler). Any fence.Guard fits.
//
// # Sending fenced requests
//
// A client puts its token into the context with WithOutgoingToken (and
// WithOutgoingIssuer); httpfence.Transport sends it as headers, the
// grpcfence client interceptors as metadata. httpfence.WithToken and
// grpcfence.WithToken are the same call.
package guard
