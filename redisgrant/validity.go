package redisgrant

import (
	"context"
	"sync"
	"time"
)

// validity is how long the client trusts a grant, on its monotonic clock:
// from just before the request that granted or last renewed it was sent,
// until sent + TTL - margin. At the end the grant's context is cancelled
// with lost. It is a liveness signal, never a safety guarantee: a paused
// process cannot act on it, and only the token check at the resource
// keeps a late write out.
type validity struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	lost   error
	margin func(time.Duration) time.Duration
	now    func() time.Time

	mu    sync.Mutex
	until time.Time
	ttl   time.Duration
	timer *time.Timer
	ended bool
}

// newValidity starts the validity of a grant requested at sent with ttl.
func newValidity(now func() time.Time, margin func(time.Duration) time.Duration, sent time.Time, ttl time.Duration, lost error) *validity {
	v := &validity{lost: lost, margin: margin, now: now, ttl: ttl, until: sent.Add(ttl - margin(ttl))}
	v.ctx, v.cancel = context.WithCancelCause(context.Background())
	v.mu.Lock()
	v.armLocked()
	v.mu.Unlock()
	return v
}

// ValidUntil returns the monotonic time until which the grant is trusted.
func (v *validity) ValidUntil() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.until
}

// Remaining returns ValidUntil minus now, or 0 once it has passed.
func (v *validity) Remaining() time.Duration { return max(v.ValidUntil().Sub(v.now()), 0) }

// valid reports whether the grant is trusted now.
func (v *validity) valid() bool {
	now := v.now()
	v.mu.Lock()
	defer v.mu.Unlock()
	return !v.ended && now.Before(v.until)
}

// renewing lowers ValidUntil at once for a renewal with a shorter ttl sent
// at sent: Redis may apply it even if its answer is lost.
func (v *validity) renewing(sent time.Time, ttl time.Duration) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if u := sent.Add(ttl - v.margin(ttl)); u.Before(v.until) {
		v.until = u
		v.armLocked()
	}
}

// renewed records a confirmed renewal sent at sent; false (nothing
// changed) when the validity ran out before the answer came.
func (v *validity) renewed(sent time.Time, ttl time.Duration) bool {
	now := v.now()
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.ended || !now.Before(v.until) {
		return false
	}
	v.ttl, v.until = ttl, sent.Add(ttl-v.margin(ttl))
	v.armLocked()
	return true
}

// TTL returns the TTL last confirmed.
func (v *validity) TTL() time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.ttl
}

// stop ends the validity now with cause.
func (v *validity) stop(cause error) {
	v.mu.Lock()
	v.ended = true
	if v.timer != nil {
		v.timer.Stop()
	}
	v.mu.Unlock()
	v.cancel(cause)
}

func (v *validity) armLocked() {
	if v.ended {
		return
	}
	if v.timer != nil {
		v.timer.Stop()
	}
	v.timer = time.AfterFunc(v.until.Sub(v.now()), v.tick)
}

func (v *validity) tick() {
	v.mu.Lock()
	if v.ended {
		v.mu.Unlock()
		return
	}
	if v.now().Before(v.until) {
		v.armLocked()
		v.mu.Unlock()
		return
	}
	v.ended = true
	v.mu.Unlock()
	v.cancel(v.lost)
}
