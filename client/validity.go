package client

import (
	"context"
	"sync"
	"time"
)

// Validity: how long the client trusts a grant, measured on the Client's
// monotonic clock (WithClock) from just before it sent the request that
// granted or last renewed it: ValidUntil = sent + TTL - margin. Every
// grant type of the SDK embeds validity, which gives it ValidUntil and
// Remaining:
//
//   - a grant that hangs off a Session (Mutex, and any primitive whose
//     grant is bound to a session) embeds validity{src: session}: it is
//     trusted as long as its session is;
//   - a grant with a TTL of its own (Lease, a permit with its own TTL)
//     embeds validity{src: ownTTL} made by newOwnTTL, which also cancels
//     the grant's context when it runs out and moves with renewals.
//
// It is a liveness signal, never a safety guarantee: a paused process
// cannot act on it, and only the token check at the resource keeps a late
// write out.

// validitySource is what a grant's trust comes from: a Session or an
// ownTTL.
type validitySource interface {
	// ValidUntil returns the monotonic time until which the client trusts
	// the grant.
	ValidUntil() time.Time
	now() time.Time
}

// validity gives a grant type ValidUntil and Remaining; embed it.
type validity struct{ src validitySource }

// ValidUntil returns the monotonic time until which the client trusts the
// grant without a further confirmed renewal: sent + TTL - margin of the
// request that granted or last renewed it (for a grant of a Session, the
// session's).
func (v validity) ValidUntil() time.Time {
	if v.src == nil {
		return time.Time{}
	}
	return v.src.ValidUntil()
}

// Remaining returns how long the client still trusts the grant on its
// monotonic clock: ValidUntil minus now, or 0 once it has passed.
func (v validity) Remaining() time.Duration {
	if v.src == nil {
		return 0
	}
	return max(v.src.ValidUntil().Sub(v.src.now()), 0)
}

func (s *Session) now() time.Time { return s.c.clock.Now() }

// Remaining returns how long the client still trusts the session without a
// further confirmed renewal: ValidUntil minus now, or 0 once it passed.
func (s *Session) Remaining() time.Duration { return validity{s}.Remaining() }

// ownTTL is the validity of a grant with a TTL of its own: nothing renews
// it but explicit renewals, and when ValidUntil passes it cancels the
// grant's context with lost.
type ownTTL struct {
	clock  clock
	ctx    context.Context
	cancel context.CancelCauseFunc
	lost   error

	mu     sync.Mutex
	until  time.Time
	ttl    time.Duration
	timer  Timer
	ended  bool // stopped or run out
	margin time.Duration
}

// newOwnTTL starts the validity of a grant whose request was sent at sent
// with ttl; at its end the returned context is cancelled with lost.
func newOwnTTL(c clock, sent time.Time, ttl time.Duration, lost error) *ownTTL {
	v := &ownTTL{clock: c, lost: lost, ttl: ttl, margin: defaultMargin(ttl)}
	v.until = sent.Add(ttl - v.margin)
	v.ctx, v.cancel = context.WithCancelCause(context.Background())
	v.mu.Lock()
	v.armLocked()
	v.mu.Unlock()
	return v
}

// ValidUntil implements validitySource.
func (v *ownTTL) ValidUntil() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.until
}

func (v *ownTTL) now() time.Time { return v.clock.Now() }

// TTL returns the grant's TTL as last confirmed or being renewed.
func (v *ownTTL) TTL() time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.ttl
}

// valid reports whether the grant is still trusted at the clock's now.
func (v *ownTTL) valid() bool {
	now := v.clock.Now()
	v.mu.Lock()
	defer v.mu.Unlock()
	return !v.ended && now.Before(v.until)
}

// renewing is called just before a renewal with ttl is sent at sent: a
// shorter TTL lowers ValidUntil at once to sent + ttl - margin, since the
// server may apply it even if its answer is lost.
func (v *ownTTL) renewing(sent time.Time, ttl time.Duration) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if vu := sent.Add(ttl - defaultMargin(ttl)); vu.Before(v.until) {
		v.until = vu
		v.armLocked()
	}
}

// renewed records a confirmed renewal sent at sent with ttl: ValidUntil
// becomes sent + ttl - margin. It reports false, changing nothing, when the
// validity ran out before the answer arrived (uncertain means lost).
func (v *ownTTL) renewed(sent time.Time, ttl time.Duration) bool {
	now := v.clock.Now()
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.ended || !now.Before(v.until) {
		return false
	}
	v.ttl, v.margin = ttl, defaultMargin(ttl)
	v.until = sent.Add(ttl - v.margin)
	v.armLocked()
	return true
}

// stop ends the validity now, cancelling the context with cause.
func (v *ownTTL) stop(cause error) {
	v.mu.Lock()
	v.ended = true
	if v.timer != nil {
		v.timer.Stop()
	}
	v.mu.Unlock()
	v.cancel(cause)
}

func (v *ownTTL) armLocked() {
	if v.ended {
		return
	}
	if v.timer != nil {
		v.timer.Stop()
	}
	v.timer = v.clock.afterFunc(v.until.Sub(v.clock.Now()), v.tick)
}

// tick cancels the context once ValidUntil has passed; a clock without
// timers is only read when a timer fires, so it re-arms when early.
func (v *ownTTL) tick() {
	v.mu.Lock()
	if v.ended {
		v.mu.Unlock()
		return
	}
	if v.clock.Now().Before(v.until) {
		v.armLocked()
		v.mu.Unlock()
		return
	}
	v.ended = true
	v.mu.Unlock()
	v.cancel(v.lost)
}
