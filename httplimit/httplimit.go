// Package httplimit is HTTP middleware that rate-limits requests with one
// of fenced's rate limiters (docs/limiter.md): a request the limiter
// grants goes on to the handler; one it refuses is answered 429 Too Many
// Requests with a Retry-After header (whole seconds, rounded up) saying
// when the permits may be free. Every decision is the cluster's, so every
// replica of a service shares one limit.
//
// When the limiter cannot be asked (no quorum, the limiter is not
// configured), requests are refused with 503 Service Unavailable and
// Retry-After 1 unless FailOpen is given: a limiter that cannot decide is
// not a limit, so the default is closed.
package httplimit

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/fenced-dev/fenced/client"
)

// Taker is what the middleware asks for permits; *client.Limiter is one.
type Taker interface {
	ReserveN(ctx context.Context, n uint64) (client.Reservation, error)
}

// Option changes the middleware.
type Option func(*config)

type config struct {
	pick     func(*http.Request) Taker
	permits  func(*http.Request) uint64
	failOpen bool
	onError  func(*http.Request, error)
}

// PerRequest picks the limiter for each request (per tenant, per route...);
// nil from pick lets the request through unlimited.
func PerRequest(pick func(*http.Request) Taker) Option {
	return func(c *config) { c.pick = pick }
}

// Permits sets how many permits a request takes (default 1).
func Permits(f func(*http.Request) uint64) Option {
	return func(c *config) { c.permits = f }
}

// FailOpen lets requests through when the limiter cannot be asked.
func FailOpen() Option { return func(c *config) { c.failOpen = true } }

// OnError is told every error asking the limiter (for logs).
func OnError(f func(*http.Request, error)) Option { return func(c *config) { c.onError = f } }

// Limit returns middleware that takes permits from l for every request.
func Limit(l Taker, opts ...Option) func(http.Handler) http.Handler {
	c := config{pick: func(*http.Request) Taker { return l }, permits: func(*http.Request) uint64 { return 1 }}
	for _, o := range opts {
		o(&c)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			t := c.pick(r)
			if t == nil {
				next.ServeHTTP(w, r)
				return
			}
			res, err := t.ReserveN(r.Context(), c.permits(r))
			switch {
			case err != nil:
				if c.onError != nil {
					c.onError(r, err)
				}
				if c.failOpen {
					next.ServeHTTP(w, r)
					return
				}
				w.Header().Set("Retry-After", "1")
				http.Error(w, "rate limiter unavailable", http.StatusServiceUnavailable)
			case !res.OK:
				w.Header().Set("Retry-After", RetryAfter(res.RetryAfter))
				http.Error(w, "too many requests", http.StatusTooManyRequests)
			default:
				next.ServeHTTP(w, r)
			}
		})
	}
}

// RetryAfter is the Retry-After value of a wait: whole seconds, rounded
// up, at least 1.
func RetryAfter(d time.Duration) string {
	s := (d + time.Second - 1) / time.Second
	return strconv.FormatInt(int64(max(s, 1)), 10)
}
