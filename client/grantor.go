package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	fence "github.com/fenced-dev/fenced"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// Grantor is the fenced server as a fence.Grantor: the same interface as
// the library grantors on PostgreSQL (pggrant) and Redis, so that an
// application moves to the server by changing its constructor alone (see
// docs/library-mode.md). Create it with NewGrantor; it is safe for
// concurrent use.
type Grantor struct {
	c    *Client
	opts []LockOption
}

var _ fence.Grantor = (*Grantor)(nil)

// NewGrantor returns c as a fence.Grantor. Each Acquire creates a session
// of the grant's TTL (fence.WithTTL) for that one grant and takes the
// lock with a Mutex of it, waiting in the server's FIFO queue with
// fence.Wait: the session's keep-alives renew the grant, its jeopardy and
// loss are the grant's, and Release closes it. opts apply to every grant
// (WithLockDelay). Closing c ends every grant it holds.
func NewGrantor(c *Client, opts ...LockOption) *Grantor {
	return &Grantor{c: c, opts: opts}
}

// Acquire implements fence.Grantor.
func (g *Grantor) Acquire(ctx context.Context, name string, opts ...fence.AcquireOption) (fence.Held, error) {
	o, err := fence.AcquireOptionsOf(opts...)
	if err == nil {
		err = fence.ValidateName(name)
	}
	if err != nil {
		return nil, fmt.Errorf("client: acquire %q: %w", name, err)
	}
	s, err := g.c.NewSession(ctx, WithTTL(o.TTL))
	if err != nil {
		return nil, fmt.Errorf("client: acquire %q: %w", name, err)
	}
	m := NewMutex(s, name, g.opts...)
	if o.Wait {
		err = m.Lock(ctx)
	} else {
		err = m.TryLock(ctx)
	}
	if err != nil {
		cctx, cancel := g.c.cleanup(ctx)
		defer cancel()
		s.Close(cctx)
		return nil, err
	}
	h := &serverHeld{c: g.c, s: s, grant: m.Grant()}
	h.ctx, h.cancel = context.WithCancelCause(m.Context())
	return h, nil
}

// serverHeld is a grant of the server held through a session of its own.
type serverHeld struct {
	c      *Client
	s      *Session
	grant  fence.Grant
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu       sync.Mutex
	released bool
}

func (h *serverHeld) Grant() fence.Grant        { return h.grant }
func (h *serverHeld) ValidUntil() time.Time     { return h.s.ValidUntil() }
func (h *serverHeld) Remaining() time.Duration  { return h.s.Remaining() }
func (h *serverHeld) Jeopardy() <-chan struct{} { return h.s.Jeopardy() }
func (h *serverHeld) Done() <-chan struct{}     { return h.ctx.Done() }
func (h *serverHeld) Context() context.Context  { return h.ctx }
func (h *serverHeld) what() string              { return fmt.Sprintf("%q (token %d)", h.grant.Name, h.grant.Token) }
func (h *serverHeld) lost(err error) error {
	return fmt.Errorf("%w: lock %s: %w", fence.ErrLockLost, h.what(), err)
}
func (h *serverHeld) end(cause error)                  { h.cancel(cause) }
func (h *serverHeld) closeSession(ctx context.Context) { h.s.Close(ctx) }

// Err implements fence.Held.
func (h *serverHeld) Err() error {
	if h.ctx.Err() == nil {
		return nil
	}
	return context.Cause(h.ctx)
}

// Release implements fence.Held: it releases the lock with the session's
// next sequence number, then closes the session. A session the server no
// longer has (its TTL ran out) released the lock when it ended; the
// outcome is then read from the lock's current holder.
func (h *serverHeld) Release(ctx context.Context) (fence.ReleaseResult, error) {
	h.mu.Lock()
	again := h.released
	h.released = true
	h.mu.Unlock()
	h.end(fence.ErrReleased)
	if again {
		return h.outcome(ctx)
	}
	cctx, cancel := h.c.until(ctx, time.Time{}, nil)
	defer cancel()
	res, err := releaseLock(cctx, h.c, h.grant.Name, h.s.id, h.s.secret, h.s.nextSeq())
	switch {
	case errors.Is(err, fence.ErrSessionNotFound):
		return h.outcome(ctx)
	case err != nil:
		return "", fmt.Errorf("client: release %s: %w", h.what(), err)
	}
	defer func() {
		rctx, cancel := h.c.cleanup(ctx)
		defer cancel()
		h.closeSession(rctx)
	}()
	switch res {
	case fencedv1.ReleaseResult_RELEASE_RESULT_RELEASED:
		return fence.Released, nil
	case fencedv1.ReleaseResult_RELEASE_RESULT_NOT_OWNED:
		return fence.NotOwned, nil
	}
	return fence.AlreadyReleased, nil
}

// outcome answers a release of a grant that had ended: NotOwned when
// another session holds the lock, AlreadyReleased otherwise.
func (h *serverHeld) outcome(ctx context.Context) (fence.ReleaseResult, error) {
	_, cur, err := h.c.Verify(ctx, h.grant.Name, h.grant.Token)
	switch {
	case err != nil:
		return "", fmt.Errorf("client: release %s: %w", h.what(), err)
	case cur.Token != 0 && cur.Token != h.grant.Token:
		return fence.NotOwned, nil
	}
	return fence.AlreadyReleased, nil
}

// Verify implements fence.Held.
func (h *serverHeld) Verify(ctx context.Context) error {
	if err := h.Err(); err != nil {
		return fmt.Errorf("client: verify %s: %w", h.what(), err)
	}
	current, _, err := h.c.Verify(ctx, h.grant.Name, h.grant.Token)
	switch {
	case err != nil:
		return fmt.Errorf("client: verify %s: %w", h.what(), err)
	case !current:
		return fmt.Errorf("client: verify: %w", h.lost(errors.New("the server's current grant has another token")))
	}
	return nil
}

// Renew implements fence.Held: it renews the grant on the server now
// (its session's keep-alives renew it anyway). ValidUntil stays the
// session's, which the keep-alives move.
func (h *serverHeld) Renew(ctx context.Context) error {
	if err := h.Err(); err != nil {
		return fmt.Errorf("client: renew %s: %w", h.what(), err)
	}
	_, err := h.c.Renew(ctx, h.grant.Name, h.s.id, h.s.secret, 0)
	switch {
	case errors.Is(err, ErrNotOwned), errors.Is(err, fence.ErrSessionNotFound):
		err = fmt.Errorf("client: renew: %w", h.lost(err))
		h.end(err)
		rctx, cancel := h.c.cleanup(ctx)
		defer cancel()
		h.closeSession(rctx)
		return err
	case err != nil:
		return err
	}
	return nil
}
