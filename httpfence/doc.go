// Package httpfence fences writes to an HTTP service: server middleware for
// net/http and a client http.RoundTripper following the HTTP convention of
// docs/design.md §5.
//
// # The convention
//
// A fenced request carries X-Fencing-Token (the token of the writer's
// grant, in decimal) and X-Resource-Id (the object it writes; when absent
// the server derives it, by default from the URL path), and optionally
// X-Fencing-Issuer (the cluster that issued the token, for resources pinned
// to one issuer). The server answers:
//
//	400 Bad Request  missing, malformed or         {"error": "..."}
//	                 repeated token (or a repeated
//	                 issuer or object)
//	409 Conflict     token below the watermark     X-Required-Token: 9
//	                                               {"error": "...", "presented": "7", "required": "9"}
//	403 Forbidden    token from another issuer     {"error": "..."}
//
// Tokens in JSON are decimal strings. Each rejection also carries
// X-Fencing-Error (invalid-token, invalid-resource, stale-token,
// issuer-mismatch) so clients can tell it from the handler's own 400s.
// Which requests are fenced is configurable; by default every method but
// GET, HEAD and OPTIONS. ParseHeaders reads the three headers as the
// middleware does, for servers that check tokens without it.
//
// # Atomic with the write
//
// A middleware that checks the token and then calls the handler protects
// nothing: two requests can both pass the check before either writes, and
// the older one then writes last (docs/design.md §1, condition 3). The check,
// the write and the raise of the watermark must be one atomic step on the
// store. This package offers two ways to get there.
//
// guard.InHandler (the default): the middleware validates the headers and
// puts the object and token into the request's context; the handler makes
// its write through guard.Do, which runs it inside the atomic step of the
// configured fence.Guard. With a PostgreSQL guard the write runs in the
// transaction that checks and raises the watermark:
//
//	g := postgres.New(pool) // or any fence.Guard: sqlfence, redisfence, filefence, guard.Memory
//	mw, _ := httpfence.New(httpfence.Config{Guard: g})
//	mux.Handle("PUT /orders/{id}", mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
//		err := guard.Do(r.Context(), func(ctx context.Context) error {
//			tx, _ := postgres.TxFromContext(ctx) // the write, under the check
//			_, err := tx.Exec(ctx, "UPDATE orders SET body = $1 WHERE id = $2", body, r.PathValue("id"))
//			return err
//		})
//		if err != nil {
//			if !httpfence.WriteError(w, err) { // 409, 400 or 403 for fencing errors
//				http.Error(w, err.Error(), http.StatusInternalServerError)
//			}
//			return
//		}
//		w.WriteHeader(http.StatusNoContent)
//	})))
//
// The context, Do and fence.Guard are shared with grpcfence: one write
// function serves an HTTP and a gRPC handler alike. Each guard says what
// the write may do inside its step (postgres.TxFromContext,
// sqlfence.TxFromContext, redisfence.PipelinerFromContext; a filefence.Dir
// runs it under the file name's lock). A handler may also call a guard of
// its own with the token of guard.TokenFrom, making its write in that
// guard's step. Either way the handler must write through the atomic step:
// a handler that ignores guard.Do and guard.TokenFrom is not fenced.
//
// guard.AroundHandler: the middleware runs the whole handler inside
// guard.Do, raising the watermark only if the handler answered 2xx, so any
// handler is fenced without changes. With a *guard.Memory guard that is a
// lock in this process (one lock for all objects, so fenced requests are
// served one at a time): it protects a resource only this process writes,
// the response is buffered, and the watermarks are lost on restart. See
// guard.AroundHandler and Config.Mode.
//
// # Client
//
// Transport adds the headers from the request's context and turns
// rejections into errors:
//
//	hc := &http.Client{Transport: &httpfence.Transport{}}
//	ctx := httpfence.WithToken(ctx, "orders/42", grant.Token)
//	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, url, body)
//	_, err := hc.Do(req)
//	var stale *fence.StaleTokenError
//	if errors.As(err, &stale) {
//		// Our grant was superseded: stop, do not retry with this token.
//	}
package httpfence
