package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// Rate-limiter algorithms (LimiterSpec.Algorithm).
const (
	FixedWindow   = "fixed_window"
	SlidingWindow = "sliding_window"
	TokenBucket   = "token_bucket"
)

// LimiterSpec configures a rate limiter (docs/limiter.md).
type LimiterSpec struct {
	// Algorithm is FixedWindow, SlidingWindow or TokenBucket.
	Algorithm string
	// Limit is the permits per window, or a bucket's capacity.
	Limit uint64
	// Window is the window, or the period in which a bucket refills Rate.
	Window time.Duration
	// Segments divides a sliding window (Window a multiple of it).
	Segments uint32
	// Rate is the tokens a bucket refills per Window.
	Rate uint64
	// Queue is how many takes may wait for permits at once (0: none).
	Queue uint32
}

func (s LimiterSpec) proto() *fencedv1.LimiterSpec {
	return &fencedv1.LimiterSpec{Algorithm: s.Algorithm, Limit: s.Limit, WindowMs: s.Window.Milliseconds(), Segments: s.Segments, Rate: s.Rate, Queue: s.Queue}
}

func specFrom(p *fencedv1.LimiterSpec) LimiterSpec {
	return LimiterSpec{Algorithm: p.GetAlgorithm(), Limit: p.GetLimit(), Window: time.Duration(p.GetWindowMs()) * time.Millisecond, Segments: p.GetSegments(), Rate: p.GetRate(), Queue: p.GetQueue()}
}

// LimiterInfo is what LimiterDescribe returns.
type LimiterInfo struct {
	Spec LimiterSpec
	// Available is how many permits a take could have at At.
	Available uint64
	// Waiting is how many takes wait in the queue.
	Waiting uint32
	// At is the leader's clock the answer is for.
	At time.Time
}

func (c *Client) limiters(ep *endpoint) fencedv1connect.LimiterServiceClient {
	return fencedv1connect.NewLimiterServiceClient(c.httpClient, ep.url)
}

// LimiterConfig creates the limiter name or changes its configuration.
// It reports whether anything changed (false: it had spec already). A
// changed spec of a limiter with permits out is refused
// (fence.ErrInvalidArgument) unless replace, which starts the limiter
// afresh: permits counted under the old spec are forgotten.
func (c *Client) LimiterConfig(ctx context.Context, name string, spec LimiterSpec, replace bool) (bool, error) {
	if err := fence.ValidateName(name); err != nil {
		return false, err
	}
	var changed bool
	err := c.retry(ctx, "limiter config", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		r, err := c.limiters(ep).Config(ctx, connect.NewRequest(&fencedv1.LimiterConfigRequest{Name: name, Spec: spec.proto(), Replace: replace}))
		if err == nil {
			changed = changed || r.Msg.GetChanged()
		}
		return err
	})
	return changed, err
}

// LimiterDescribe returns the limiter's configuration and what it has
// free now.
func (c *Client) LimiterDescribe(ctx context.Context, name string) (LimiterInfo, error) {
	if err := fence.ValidateName(name); err != nil {
		return LimiterInfo{}, err
	}
	var out LimiterInfo
	err := c.retry(ctx, "limiter describe", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		r, err := c.limiters(ep).Describe(ctx, connect.NewRequest(&fencedv1.LimiterDescribeRequest{Name: name}))
		if err == nil {
			m := r.Msg
			out = LimiterInfo{Spec: specFrom(m.GetSpec()), Available: m.GetAvailable(), Waiting: m.GetWaiting(), At: time.UnixMilli(m.GetNowUnixMs())}
		}
		return err
	})
	return out, err
}

// Reservation is the answer to a take: OK, or not and when to try again.
type Reservation struct {
	// OK reports that the permits were granted.
	OK bool
	// Waited is how long the take waited in the limiter's queue (OK).
	Waited time.Duration
	// RetryAfter is when the permits may be free (not OK).
	RetryAfter time.Duration
}

// take is one Take call. A take retried after a lost answer may be
// counted twice: the limiter then grants fewer permits, never more.
func (c *Client) take(ctx context.Context, name string, n uint64, maxWait time.Duration) (Reservation, error) {
	var out Reservation
	err := c.retry(ctx, "limiter take", c.requestTimeout+maxWait, func(ctx context.Context, ep *endpoint) error {
		m, err := c.limiterTake(ctx, ep, &fencedv1.LimiterTakeRequest{Name: name, Permits: n, MaxWaitMs: maxWait.Milliseconds()})
		if err == nil {
			out = Reservation{OK: m.GetGranted(), Waited: time.Duration(m.GetWaitedMs()) * time.Millisecond, RetryAfter: time.Duration(m.GetRetryAfterMs()) * time.Millisecond}
		}
		return err
	})
	return out, err
}

// Limiter is a handle on one of the server's rate limiters, in the shape
// of golang.org/x/time/rate.Limiter: Allow, Reserve and Wait, each
// deciding on the server (one consensus write per take) unless the handle
// batches (WithBatch). A Limiter is safe for concurrent use.
type Limiter struct {
	c      *Client
	name   string
	batch  uint64
	maxAge time.Duration

	mu      sync.Mutex
	local   uint64    // permits taken from the server and not yet handed out
	takenAt time.Time // when they were taken
}

// LimiterOption changes a Limiter handle.
type LimiterOption func(*Limiter)

// WithBatch makes the handle take n permits from the server at a time and
// hand them out locally, for at most maxAge after they were taken; what
// is left then is dropped. Decisions per second are then no longer bound
// by one round trip each. The trade-off (docs/limiter.md): permits taken
// and not handed out are consumed all the same (other clients cannot have
// them), and a permit is used up to maxAge after the server counted it, so
// the limit holds for windows shifted by up to maxAge. Keep maxAge well
// under the window. n 0 or 1 turns batching off.
func WithBatch(n uint64, maxAge time.Duration) LimiterOption {
	return func(l *Limiter) { l.batch, l.maxAge = n, maxAge }
}

// Limiter returns a handle on the limiter name (configured with
// LimiterConfig or fenced limiter config).
func (c *Client) Limiter(name string, opts ...LimiterOption) *Limiter {
	l := &Limiter{c: c, name: name}
	for _, o := range opts {
		o(l)
	}
	return l
}

// Allow reports whether one permit is free now, and takes it if so.
func (l *Limiter) Allow(ctx context.Context) (bool, error) {
	r, err := l.ReserveN(ctx, 1)
	return r.OK, err
}

// AllowN reports whether n permits are free now, and takes them if so.
func (l *Limiter) AllowN(ctx context.Context, n uint64) (bool, error) {
	r, err := l.ReserveN(ctx, n)
	return r.OK, err
}

// ReserveN takes n permits now if they are free; otherwise the
// Reservation says when to try again. It never waits in the queue.
func (l *Limiter) ReserveN(ctx context.Context, n uint64) (Reservation, error) {
	if err := fence.ValidateName(l.name); err != nil {
		return Reservation{}, err
	}
	if n == 0 {
		return Reservation{}, fmt.Errorf("client: %w: a take needs at least 1 permit", fence.ErrInvalidArgument)
	}
	if l.batch <= 1 || n >= l.batch {
		return l.c.take(ctx, l.name, n, 0)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.local > 0 && l.c.clock.Now().Sub(l.takenAt) > l.maxAge {
		l.local = 0 // too old: the server counted them a window ago
	}
	if l.local >= n {
		l.local -= n
		return Reservation{OK: true}, nil
	}
	start := l.c.clock.Now()
	r, err := l.c.take(ctx, l.name, l.batch, 0)
	if err != nil {
		return r, err
	}
	if !r.OK {
		// Not a whole batch: try for just what is asked.
		return l.c.take(ctx, l.name, n, 0)
	}
	l.local, l.takenAt = l.batch-n, start
	return Reservation{OK: true}, nil
}

// waitMargin is the most of a WaitN's time left for its answer to arrive.
const waitMargin = 500 * time.Millisecond

// Wait takes one permit, waiting until it is free or ctx ends.
func (l *Limiter) Wait(ctx context.Context) error { return l.WaitN(ctx, 1) }

// WaitN takes n permits, waiting until they are free or ctx ends. With a
// queue configured the take waits in it, up to shortly before ctx's
// deadline (at most an hour per call), and the server answers when the
// permits are granted;
// when the queue is full, or without one, WaitN sleeps the retry-after
// and tries again. A WaitN whose ctx ends while it waits in the queue has
// used its permits all the same.
func (l *Limiter) WaitN(ctx context.Context, n uint64) error {
	if r, err := l.ReserveN(ctx, n); err != nil || r.OK {
		return err
	}
	for {
		wait := time.Hour
		if d, ok := ctx.Deadline(); ok {
			// Leave the answer time to arrive before ctx ends: a take
			// granted at the deadline would be counted and not seen.
			left := time.Until(d)
			wait = min(wait, max(left-min(left/10, waitMargin), 0))
		}
		r, err := l.c.take(ctx, l.name, n, wait)
		if err != nil || r.OK {
			return err
		}
		t := time.NewTimer(max(r.RetryAfter, time.Millisecond))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		}
	}
}
