// Package guard holds the watermark rule of docs/design.md §5 in one place, an
// in-memory Guard for tests and single-process resources, and the
// transport-independent half of fencing a service: the Store a server
// checks tokens against, the fence of a request being served, and the
// fence a client sends. httpfence and grpcfence put these on the wire.
//
// # The rule
//
// Per object: a token below the highest accepted so far is rejected with a
// *fence.StaleTokenError carrying the presented and the required token; an
// equal token is accepted (repeated writes within one grant); a higher
// token is accepted and becomes the watermark. Decide applies it; guards
// whose check runs in their store (SQL, Lua) implement it there after
// ValidateToken. Memory applies it under a mutex.
//
// # Serving fenced requests
//
// A transport layer (the httpfence middleware, the grpcfence interceptors)
// parses a request's token, object and issuer and hands the handler a
// context made by WithFence and ContextWithIssuer. The handler makes its
// write through Do, which runs it inside the Store's atomic step, so the
// check, the write and the raise of the watermark cannot interleave with
// another request's:
//
//	err := guard.Do(ctx, func(ctx context.Context) error {
//		return orders.Put(id, order) // the write, under the check
//	})
//
// The same handler code serves HTTP and gRPC. A handler whose store checks
// tokens in its own transaction takes them from TokenFrom instead. Mode
// says whether the handler calls Do (InHandler) or the transport runs the
// whole handler inside it (AroundHandler). Any Store fits: *Memory, or a
// database guard adapted with StoreFunc.
//
// # Sending fenced requests
//
// A client puts its token into the context with WithOutgoingToken (and
// WithOutgoingIssuer); httpfence.Transport sends it as headers, the
// grpcfence client interceptors as metadata. httpfence.WithToken and
// grpcfence.WithToken are the same call.
package guard
