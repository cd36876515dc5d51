// Package grantkeep keeps one library grant (a fence.Held of pggrant or the
// Redis grantor) alive: it renews the grant at the store every TTL/3,
// measures its validity on the monotonic clock (ValidUntil = sent + TTL -
// margin of the newest confirmed request), signals jeopardy when a renewal
// that should have been confirmed was not, and ends the grant (Done,
// Context, Err) at ValidUntil at the latest, even when a renewal is stuck
// on the network. It is the library grantors' copy of what client.Session
// does for the fenced server.
//
// The validity is a liveness signal, never a safety guarantee: only the
// token check at the resource keeps a paused holder's write out.
package grantkeep

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	fence "github.com/fenced-dev/fenced"
)

// RenewFunc renews the grant at the store for its TTL, keeping its token.
// It returns nil when the store confirmed the renewal, an error wrapping
// fence.ErrLockLost when the store no longer has the grant (final), and
// any other error for a renewal whose outcome is unknown (retried).
type RenewFunc func(ctx context.Context) error

// Hold is the validity of one grant. Create it with Start; its methods
// implement the validity half of fence.Held and are safe for concurrent
// use.
type Hold struct {
	ttl, margin, jeopardyAfter time.Duration
	renew                      RenewFunc
	what                       string // for errors: `lock "name" (token N)`

	ctx    context.Context
	cancel context.CancelCauseFunc

	mu         sync.Mutex
	ended      bool
	err        error
	confirmed  time.Time // sending time of the newest confirmed request
	validUntil time.Time
	timer      *time.Timer // next jeopardy or validity deadline
	jeopardy   chan struct{}
	inJeopardy bool
	renewMu    sync.Mutex // one renewal at a time
	stopped    chan struct{}

	// The renewal loop is a timer, not a goroutine: a grant released
	// before its first renewal (the common short hold) costs no goroutine.
	// renewTimer runs renewTick TTL/3 after the last confirmed renewal; it
	// is armed whenever the grant has not ended and no renewTick runs.
	renewTimer *time.Timer
	retry      time.Duration // the pause after a failed renewal
}

// Start begins keeping a grant alive whose granting request was sent at
// sent (read with time.Now just before it was sent) for ttl. what names
// the grant in errors. The loop renews with renew every TTL/3 until End.
func Start(sent time.Time, ttl time.Duration, what string, renew RenewFunc) *Hold {
	margin := fence.DefaultMargin(ttl)
	h := &Hold{
		ttl: ttl, margin: margin, jeopardyAfter: jeopardyAfter(ttl, margin),
		renew: renew, what: what,
		confirmed:  sent,
		validUntil: sent.Add(ttl - margin),
		jeopardy:   make(chan struct{}),
		stopped:    make(chan struct{}),
	}
	h.ctx, h.cancel = context.WithCancelCause(context.Background())
	h.retry = min(max(ttl/10, 10*time.Millisecond), time.Second)
	h.mu.Lock()
	h.armLocked()
	h.renewTimer = time.AfterFunc(ttl/3, h.renewTick)
	h.mu.Unlock()
	return h
}

// jeopardyAfter is how long after the last confirmed renewal was sent a
// grant enters jeopardy: 2·TTL/3 (one whole renewal interval overdue), but
// never later than halfway between that renewal and the end of validity.
func jeopardyAfter(ttl, margin time.Duration) time.Duration {
	j := 2 * ttl / 3
	if valid := ttl - margin; j >= valid {
		j = (ttl/3 + valid) / 2
	}
	return j
}

// Valid reports whether the grant is still trusted now.
func (h *Hold) Valid() bool {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.ended && now.Before(h.validUntil)
}

// ValidUntil implements fence.Held.
func (h *Hold) ValidUntil() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.validUntil
}

// Remaining implements fence.Held.
func (h *Hold) Remaining() time.Duration { return max(time.Until(h.ValidUntil()), 0) }

// Jeopardy implements fence.Held.
func (h *Hold) Jeopardy() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.jeopardy
}

// Done implements fence.Held.
func (h *Hold) Done() <-chan struct{} { return h.ctx.Done() }

// Context implements fence.Held.
func (h *Hold) Context() context.Context { return h.ctx }

// Err implements fence.Held.
func (h *Hold) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// Renew renews the grant now and waits for the answer (fence.Held.Renew).
func (h *Hold) Renew(ctx context.Context) error {
	if err := h.Err(); err != nil {
		return fmt.Errorf("renew %s: %w", h.what, err)
	}
	return h.renewOnce(ctx)
}

// End ends the grant locally with cause, once: renewals stop, Jeopardy and
// Done close and Context is cancelled with cause. It does not touch the
// store; the caller releases there if it wants to.
func (h *Hold) End(cause error) {
	h.mu.Lock()
	if h.ended {
		h.mu.Unlock()
		return
	}
	h.ended, h.err = true, cause
	if h.timer != nil {
		h.timer.Stop()
	}
	if h.renewTimer.Stop() {
		// No renewTick runs or will run; one that runs closes stopped
		// itself when it sees the end.
		close(h.stopped)
	}
	if !h.inJeopardy {
		close(h.jeopardy)
		h.inJeopardy = true
	}
	h.mu.Unlock()
	h.cancel(cause)
}

// Stopped returns a channel closed when the renewal loop has ended (after
// End); tests use it to know no renewal is left in flight.
func (h *Hold) Stopped() <-chan struct{} { return h.stopped }

// renewOnce sends one renewal bounded by the grant's validity and records
// its outcome.
func (h *Hold) renewOnce(ctx context.Context) error {
	h.renewMu.Lock()
	defer h.renewMu.Unlock()
	sent := time.Now()
	vctx, cancel := context.WithDeadline(ctx, h.ValidUntil())
	defer cancel()
	stop := context.AfterFunc(h.ctx, cancel)
	defer stop()
	err := h.renew(vctx)
	switch {
	case errors.Is(err, fence.ErrLockLost):
		err = fmt.Errorf("renew %s: %w", h.what, err)
		h.End(err)
		return err
	case err != nil:
		if h.ctx.Err() != nil {
			return fmt.Errorf("renew %s: %w", h.what, context.Cause(h.ctx))
		}
		return fmt.Errorf("renew %s: %w", h.what, err)
	}
	return h.renewed(sent)
}

// renewed records a confirmed renewal sent at sent.
func (h *Hold) renewed(sent time.Time) error {
	now := time.Now()
	h.mu.Lock()
	if h.ended {
		err := h.err
		h.mu.Unlock()
		return fmt.Errorf("renew %s: %w", h.what, err)
	}
	if !now.Before(h.validUntil) {
		// Confirmed after the validity ran out: uncertain means lost.
		h.mu.Unlock()
		err := h.expired()
		return fmt.Errorf("renew %s: %w", h.what, err)
	}
	if vu := sent.Add(h.ttl - h.margin); vu.After(h.validUntil) {
		h.validUntil = vu
	}
	if sent.After(h.confirmed) {
		h.confirmed = sent
	}
	if h.inJeopardy && now.Before(h.confirmed.Add(h.jeopardyAfter)) {
		h.jeopardy = make(chan struct{})
		h.inJeopardy = false
	}
	h.armLocked()
	h.mu.Unlock()
	return nil
}

// expired ends the grant because its validity ran out, and returns why.
func (h *Hold) expired() error {
	err := fmt.Errorf("%w: %s: validity ran out without a confirmed renewal", fence.ErrLockLost, h.what)
	h.End(err)
	return h.Err()
}

// armLocked sets the timer to the next deadline: jeopardy, then the end of
// validity.
func (h *Hold) armLocked() {
	if h.timer != nil {
		h.timer.Stop()
	}
	next := h.validUntil
	if j := h.confirmed.Add(h.jeopardyAfter); !h.inJeopardy && j.Before(next) {
		next = j
	}
	h.timer = time.AfterFunc(time.Until(next), h.tick)
}

// tick applies the deadlines that have passed.
func (h *Hold) tick() {
	now := time.Now()
	h.mu.Lock()
	if h.ended {
		h.mu.Unlock()
		return
	}
	if !now.Before(h.validUntil) {
		h.mu.Unlock()
		h.expired()
		return
	}
	if !h.inJeopardy && !now.Before(h.confirmed.Add(h.jeopardyAfter)) {
		close(h.jeopardy)
		h.inJeopardy = true
	}
	h.armLocked()
	h.mu.Unlock()
}

// renewTick is the renewal loop's step: it renews TTL/3 after the last
// confirmed renewal was sent, and after a failed one again after a short
// pause, until the grant ends. It runs on renewTimer, one at a time.
func (h *Hold) renewTick() {
	h.mu.Lock()
	if h.ended {
		close(h.stopped)
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	err := h.renewOnce(h.ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended {
		close(h.stopped)
		return
	}
	due := time.Now().Add(h.retry)
	if err == nil {
		due = h.confirmed.Add(h.ttl / 3)
	}
	h.renewTimer.Reset(time.Until(due))
}
