package client

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// attemptCtx is the context of one attempt of Client.retry: its parent
// with the attempt's deadline, made without a timer. A pipeline call
// enforces the deadline itself, with one timer per stream for all its
// calls (pipeStream.expire), and waits only on the parent's Done; anything
// else that asks for Done (a unary Connect call, a derived context) gets
// that of a context.WithDeadline made on first use, so it behaves as the
// context.WithTimeout of the attempt it replaces.
type attemptCtx struct {
	parent   context.Context
	deadline time.Time // on the monotonic clock (time.Now)

	mu    sync.Mutex // makes timed
	timed atomic.Pointer[timedCtx]
	ended atomic.Bool // end was called
}

// timedCtx is the context.WithDeadline of an attemptCtx.
type timedCtx struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func newAttempt(parent context.Context, d time.Duration) *attemptCtx {
	return &attemptCtx{parent: parent, deadline: time.Now().Add(d)}
}

// Deadline implements context.Context: the attempt's or the parent's,
// whichever is earlier.
func (a *attemptCtx) Deadline() (time.Time, bool) {
	if d, ok := a.parent.Deadline(); ok && d.Before(a.deadline) {
		return d, true
	}
	return a.deadline, true
}

// Done implements context.Context: closed when the parent ends or the
// deadline passes.
func (a *attemptCtx) Done() <-chan struct{} { return a.timedCtx().Done() }

// Err implements context.Context.
func (a *attemptCtx) Err() error {
	if t := a.timed.Load(); t != nil {
		return t.ctx.Err()
	}
	if a.ended.Load() {
		return context.Canceled
	}
	if err := a.parent.Err(); err != nil {
		return err
	}
	if !time.Now().Before(a.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// Value implements context.Context: the timed context's once made (so
// that a context derived from the attempt is that context's child, and
// context.Cause sees its deadline), the parent's before.
func (a *attemptCtx) Value(key any) any {
	if t := a.timed.Load(); t != nil {
		return t.ctx.Value(key)
	}
	return a.parent.Value(key)
}

func (a *attemptCtx) timedCtx() context.Context {
	if t := a.timed.Load(); t != nil {
		return t.ctx
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if t := a.timed.Load(); t != nil {
		return t.ctx
	}
	ctx, cancel := context.WithDeadline(a.parent, a.deadline)
	if a.ended.Load() {
		cancel() // as a WithTimeout's after its attempt
	}
	a.timed.Store(&timedCtx{ctx, cancel})
	return ctx
}

// end ends the attempt: like the cancel of a context.WithTimeout, it
// releases the timed context, and one made later is cancelled.
func (a *attemptCtx) end() {
	a.mu.Lock()
	a.ended.Store(true)
	t := a.timed.Load()
	a.mu.Unlock()
	if t != nil {
		t.cancel()
	}
}

// attemptOf returns the parent's Done and the attempt's deadline when ctx
// is an attempt's, for a caller that enforces the deadline itself; else
// ctx's Done and no deadline.
func attemptOf(ctx context.Context) (<-chan struct{}, time.Time) {
	if a, ok := ctx.(*attemptCtx); ok {
		return a.parent.Done(), a.deadline
	}
	return ctx.Done(), time.Time{}
}
