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

// TTLLock is a lock granted with a TTL of its own (see Client.Acquire): the
// server holds it for at least the TTL and then releases it; nothing keeps
// it alive. Unlike a Mutex, whose grant lasts as long as its Session is
// kept alive, a TTLLock is never renewed: it suits work that fits in one
// TTL. Its validity is measured like a session's: from just before
// the acquire was first sent, ValidUntil = sent + TTL - margin, with the
// default margin of WithMargin.
//
// A TTLLock is safe for concurrent use.
type TTLLock struct {
	c          *Client
	grant      fence.Grant
	secret     string // the secret of the lock's session
	validUntil time.Time
	ctx        context.Context
	cancel     context.CancelCauseFunc
	timer      Timer

	mu       sync.Mutex
	released bool
}

// Acquire acquires the lock name for ttl alone, without a session to keep
// alive: the server creates a session of ttl for this one grant and
// releases the lock when ttl runs out, unless Release comes first. It does
// not wait: when another session holds the lock, Acquire returns an error
// wrapping fence.ErrNotGranted.
//
// Network failures are retried, on the next endpoint if need be, with the
// same request id, so a retried acquire is applied once. Retries stop when
// ctx ends or when the lock's validity (ttl - margin from the first
// attempt) runs out; in the latter case Acquire returns an error wrapping
// fence.ErrLockLost. A grant whose reply arrives after the validity ran
// out is released and reported the same way; it is never returned.
//
// An acquire that fails because ctx ended, or because the validity ran
// out, leaves nothing behind, as Mutex.Lock's does: an acquire not yet sent
// is not sent, and one that was is withdrawn before Acquire returns (the
// server refuses it if it arrives later, and releases its grant if it was
// made). If the server cannot be reached within the request timeout, the
// SDK goes on withdrawing in the background; a grant the withdrawal never
// reaches is released by the server when its ttl runs out. A "not
// granted" after retries is followed by a withdrawal too: an earlier
// attempt still on its way would be applied as a new try.
//
// Acquire fails with an error wrapping fence.ErrInvalidArgument for an
// invalid name or a ttl outside fence.MinTTL..fence.MaxTTL, before sending
// anything.
func (c *Client) Acquire(ctx context.Context, name string, ttl time.Duration) (*TTLLock, error) {
	if err := fence.ValidateName(name); err != nil {
		return nil, fmt.Errorf("client: acquire: %w", err)
	}
	if err := fence.ValidateTTL(ttl); err != nil {
		return nil, fmt.Errorf("client: acquire %q: %w", name, err)
	}
	if err := c.closed(); err != nil {
		return nil, fmt.Errorf("client: acquire %q: %w", name, err)
	}
	reqID, secret := newRequestID(), newSecret()
	sent := c.clock.Now()
	validUntil := sent.Add(ttl - defaultMargin(ttl))
	vctx, cancel := c.until(ctx, validUntil, errTooLate)
	defer cancel()
	var resp *fencedv1.AcquireResponse
	sends := 0 // attempts the server may have seen
	err := c.retry(vctx, "acquire", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		r, err := ep.acquire(ctx, &fencedv1.AcquireRequest{
			Name:      name,
			TtlMs:     ttl.Milliseconds(),
			RequestId: reqID,
			Secret:    secret,
		})
		if !errors.Is(err, errNotSent) {
			sends++
		}
		resp = r
		return err
	})
	// withdraw undoes the acquire, whatever became of it; the background
	// retries stop when a grant would have run out anyway.
	withdraw := func() {
		if sends > 0 {
			c.withdraw(ctx, &fencedv1.ReleaseRequest{Name: name, RequestId: reqID, TtlMs: ttl.Milliseconds(), WithdrawSeq: 1, Secret: secret}, context.Background(), sent.Add(ttl))
		}
	}
	switch {
	case err != nil && errors.Is(err, errTooLate) && ctx.Err() == nil:
		withdraw()
		return nil, fmt.Errorf("client: acquire %q: %w: no reply within the lock's validity; the acquire was withdrawn (a grant the withdrawal cannot reach ends with its ttl of %v)",
			name, fence.ErrLockLost, ttl)
	case err != nil:
		if ctx.Err() != nil {
			withdraw()
		}
		return nil, fmt.Errorf("client: acquire %q: %w", name, err)
	case resp.GetGranted() && ctx.Err() != nil:
		withdraw()
		return nil, fmt.Errorf("client: acquire %q: %w", name, ctx.Err())
	case !resp.GetGranted():
		if sends > 1 {
			// An earlier attempt may still be on its way, and the server
			// would apply it as a new try: withdraw it.
			withdraw()
		}
		return nil, fmt.Errorf("client: acquire %q: %w: %s", name, fence.ErrNotGranted, heldBy(resp.GetHolder()))
	}
	l := &TTLLock{c: c, grant: grantOf(resp.GetGrant(), 0, ttl), secret: secret, validUntil: validUntil}
	if !c.clock.Now().Before(validUntil) {
		rctx, cancel := c.cleanup(ctx)
		defer cancel()
		l.Release(rctx)
		return nil, fmt.Errorf("client: acquire %q: %w: granted with token %d after the lock's validity ran out; released",
			name, fence.ErrLockLost, l.grant.Token)
	}
	l.ctx, l.cancel = context.WithCancelCause(context.Background())
	lost := fmt.Errorf("%w: TTL lock on %q (token %d): %w", fence.ErrLockLost, name, l.grant.Token, ErrExpired)
	var expire func()
	expire = func() {
		// A clock without timers is only read when a timer fires.
		if left := l.validUntil.Sub(c.clock.Now()); left > 0 {
			l.mu.Lock()
			if !l.released {
				l.timer = c.clock.afterFunc(left, expire)
			}
			l.mu.Unlock()
			return
		}
		l.cancel(lost)
	}
	l.mu.Lock()
	l.timer = c.clock.afterFunc(validUntil.Sub(c.clock.Now()), expire)
	l.mu.Unlock()
	return l, nil
}

// Token returns the lock's fencing token.
func (l *TTLLock) Token() fence.Token { return l.grant.Token }

// Grant returns the lock's grant. Its Session is the server-side session
// created for this grant alone.
func (l *TTLLock) Grant() fence.Grant { return l.grant }

// Secret returns the secret of the lock's session: with it and the
// grant's Session, the lock can be released by another process (fenced
// release --session ID --secret S). Treat it like a password.
func (l *TTLLock) Secret() string { return l.secret }

// ValidUntil returns the monotonic time at which the client stops trusting
// the lock.
func (l *TTLLock) ValidUntil() time.Time { return l.validUntil }

// Context returns a context for the work done under the lock. It is
// cancelled at ValidUntil, with a cause wrapping fence.ErrLockLost and
// ErrExpired, or by Release, with ErrNotHeld.
func (l *TTLLock) Context() context.Context {
	if l.ctx == nil {
		return notHeld
	}
	return l.ctx
}

// Release releases the lock before its TTL runs out. The Context is
// cancelled first. Network failures are retried, with the same request,
// until ctx ends. Release returns nil when the server released the lock or
// no longer had it (its TTL ran out), and an error wrapping ErrNotOwned
// when another session holds it, which means the TTL ran out and the lock
// was granted again.
func (l *TTLLock) Release(ctx context.Context) error {
	l.mu.Lock()
	l.released = true
	if l.timer != nil {
		l.timer.Stop()
	}
	l.mu.Unlock()
	if l.cancel != nil {
		l.cancel(ErrNotHeld)
	}
	cctx, cancel := l.c.until(ctx, time.Time{}, nil)
	defer cancel()
	// The server used seq 1 of the lock's session for the acquire.
	res, err := releaseLock(cctx, l.c, l.grant.Name, l.grant.Session, l.secret, 2)
	switch {
	case errors.Is(err, fence.ErrSessionNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("client: release %q: %w", l.grant.Name, err)
	case res == fencedv1.ReleaseResult_RELEASE_RESULT_NOT_OWNED:
		return fmt.Errorf("client: release %q: %w", l.grant.Name, ErrNotOwned)
	}
	return nil
}

// heldBy says who holds a lock an acquire did not get: the holder's
// session, which a server with an auth file names only to identities that
// may read the lock (0 otherwise).
func heldBy(holder uint64) string {
	if holder == 0 {
		return "held by a session the server did not name (with an auth file it names it only to identities with read on the lock)"
	}
	return fmt.Sprintf("held by session %d", holder)
}
