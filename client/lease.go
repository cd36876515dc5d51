package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// Lease is a lock granted with a TTL of its own (see Client.Acquire): the
// server holds it for at least the TTL after it was granted or last
// renewed, and then releases it; nothing keeps it alive in the background.
// Unlike a Mutex, whose grant lasts as long as its Session is kept alive,
// a Lease lives for its TTL unless Renew extends it (or changes the TTL),
// keeping its token. Its validity is measured like a session's: from just
// before the acquire or the last confirmed renewal was sent, ValidUntil =
// sent + TTL - margin, with the default margin of WithMargin
// (ValidUntil, Remaining).
//
// A Lease is safe for concurrent use.
type Lease struct {
	validity
	c      *Client
	grant  fence.Grant
	secret string // the secret of the lease's session
	v      *ownTTL

	mu       sync.Mutex
	released bool
}

// TTLLock is the former name of Lease.
//
// Deprecated: use Lease.
type TTLLock = Lease

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
func (c *Client) Acquire(ctx context.Context, name string, ttl time.Duration, opts ...LockOption) (*Lease, error) {
	if err := fence.ValidateName(name); err != nil {
		return nil, fmt.Errorf("client: acquire: %w", err)
	}
	if err := fence.ValidateTTL(ttl); err != nil {
		return nil, fmt.Errorf("client: acquire %q: %w", name, err)
	}
	if err := c.closed(); err != nil {
		return nil, fmt.Errorf("client: acquire %q: %w", name, err)
	}
	o, err := lockOptionsOf(opts)
	if err != nil {
		return nil, fmt.Errorf("client: acquire %q: %w", name, err)
	}
	reqID, secret := newRequestID(), newSecret()
	sent := c.clock.Now()
	validUntil := sent.Add(ttl - defaultMargin(ttl))
	vctx, cancel := c.until(ctx, validUntil, errTooLate)
	defer cancel()
	var resp *fencedv1.AcquireResponse
	sends := 0 // attempts the server may have seen
	err = c.retry(vctx, "acquire", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		r, err := ep.acquire(ctx, &fencedv1.AcquireRequest{
			Name:        name,
			TtlMs:       ttl.Milliseconds(),
			RequestId:   reqID,
			Secret:      secret,
			LockDelayMs: o.lockDelayMs,
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
		return nil, fmt.Errorf("client: acquire %q: %w: %w", name, fence.ErrNotGranted, notGrantedReason(resp))
	}
	lost := fmt.Errorf("%w: lease on %q (token %d): %w", fence.ErrLockLost, name, resp.GetGrant().GetToken(), ErrExpired)
	l := &Lease{c: c, grant: grantOf(resp.GetGrant(), 0, ttl), secret: secret, v: newOwnTTL(c.clock, sent, ttl, lost)}
	l.validity = validity{l.v}
	if !l.v.valid() {
		rctx, cancel := c.cleanup(ctx)
		defer cancel()
		l.Release(rctx)
		return nil, fmt.Errorf("client: acquire %q: %w: granted with token %d after the lock's validity ran out; released",
			name, fence.ErrLockLost, l.grant.Token)
	}
	return l, nil
}

// Token returns the lock's fencing token.
func (l *Lease) Token() fence.Token { return l.grant.Token }

// Grant returns the lock's grant. Its Session is the server-side session
// created for this grant alone; its TTL is the one of the last confirmed
// renewal.
func (l *Lease) Grant() fence.Grant {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.grant
}

// Secret returns the secret of the lock's session: with it and the
// grant's Session, the lock can be released by another process (fenced
// release --session ID --secret S). Treat it like a password.
func (l *Lease) Secret() string { return l.secret }

// Context returns a context for the work done under the lock. It is
// cancelled at ValidUntil, with a cause wrapping fence.ErrLockLost and
// ErrExpired, or by Release, with ErrNotHeld; a Renew that finds the
// lease gone cancels it too, with the renewal's error.
func (l *Lease) Context() context.Context {
	if l.v == nil {
		return notHeld
	}
	return l.v.ctx
}

// Release releases the lock before its TTL runs out. The Context is
// cancelled first. Network failures are retried, with the same request,
// until ctx ends. Release returns nil when the server released the lock or
// no longer had it (its TTL ran out), and an error wrapping ErrNotOwned
// when another session holds it, which means the TTL ran out and the lock
// was granted again.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	l.released = true
	l.mu.Unlock()
	l.v.stop(ErrNotHeld)
	cctx, cancel := l.c.until(ctx, time.Time{}, nil)
	defer cancel()
	// The server used seq 1 of the lock's session for the acquire.
	g := l.Grant()
	res, err := releaseLock(cctx, l.c, g.Name, g.Session, l.secret, 2)
	switch {
	case errors.Is(err, fence.ErrSessionNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("client: release %q: %w", g.Name, err)
	case res == fencedv1.ReleaseResult_RELEASE_RESULT_NOT_OWNED:
		return fmt.Errorf("client: release %q: %w", g.Name, ErrNotOwned)
	}
	return nil
}

// Renew renews the lease under the same token: the server keeps it for at
// least ttl from when it applies the renewal, and ttl becomes the lease's
// TTL (0 keeps the current one). On success ValidUntil becomes sent + ttl
// - margin, measured from just before the renewal was sent. A shorter ttl
// lowers ValidUntil before anything is sent, since the server may apply
// it even if its answer is lost; a longer one counts only once confirmed.
// Network failures are retried, on the next endpoint if need be, until
// ctx ends or the lease's validity runs out.
//
// Renew fails with an error wrapping fence.ErrLockLost, and cancels the
// Context, when the lease is gone: its validity ran out before a renewal
// was confirmed, its session expired on the server, or its lock is held
// by another session (the error wraps ErrNotOwned too). Renewing a lease
// after Release fails with ErrNotHeld. A ttl outside
// fence.MinTTL..fence.MaxTTL is an error wrapping fence.ErrInvalidArgument
// and sends nothing. A renewal is a log entry on the server: renew when
// the work needs more time, not on a short timer (a Session's keep-alives
// are cheaper for that).
func (l *Lease) Renew(ctx context.Context, ttl time.Duration) error {
	g := l.Grant()
	if ttl != 0 {
		if err := fence.ValidateTTL(ttl); err != nil {
			return fmt.Errorf("client: renew %q: %w", g.Name, err)
		}
	} else {
		ttl = l.v.TTL()
	}
	l.mu.Lock()
	released := l.released
	l.mu.Unlock()
	if released {
		return fmt.Errorf("client: renew %q: %w", g.Name, ErrNotHeld)
	}
	if !l.v.valid() {
		cause := context.Cause(l.v.ctx)
		if cause == nil { // run out, and the timer has not fired yet
			cause = l.v.lost
		}
		return fmt.Errorf("client: renew %q: %w", g.Name, cause)
	}
	sent := l.c.clock.Now()
	l.v.renewing(sent, ttl)
	vctx, cancel := l.c.until(ctx, l.v.ValidUntil(), errTooLate)
	defer cancel()
	resp, err := renewGrant(vctx, l.c, &fencedv1.RenewRequest{
		Name: g.Name, Session: g.Session, Secret: l.secret, TtlMs: ttl.Milliseconds(), Token: uint64(g.Token),
	})
	lose := func(err error) error {
		err = fmt.Errorf("client: renew %q (token %d): %w", g.Name, g.Token, err)
		l.v.stop(err)
		return err
	}
	switch {
	case err != nil && errors.Is(err, errTooLate) && ctx.Err() == nil:
		return lose(fmt.Errorf("%w: no confirmed renewal within the lease's validity: %w", fence.ErrLockLost, ErrExpired))
	case errors.Is(err, fence.ErrSessionNotFound):
		return lose(fmt.Errorf("%w: %w", fence.ErrLockLost, err))
	case err != nil:
		return fmt.Errorf("client: renew %q: %w", g.Name, err)
	case resp.GetResult() != fencedv1.RenewResult_RENEW_RESULT_RENEWED:
		return lose(fmt.Errorf("%w: %w", fence.ErrLockLost, ErrNotOwned))
	}
	if !l.v.renewed(sent, ttl) {
		return lose(fmt.Errorf("%w: the renewal was confirmed after the lease's validity ran out: %w", fence.ErrLockLost, ErrExpired))
	}
	l.mu.Lock()
	l.grant.TTL = ttl
	l.mu.Unlock()
	return nil
}

// renewGrant sends a Renew, retrying network failures until ctx ends; a
// renewal only sets a TTL, so applying it twice does no harm.
func renewGrant(ctx context.Context, c *Client, req *fencedv1.RenewRequest) (*fencedv1.RenewResponse, error) {
	var resp *fencedv1.RenewResponse
	err := c.retry(ctx, "renew", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		r, err := ep.locks.Renew(ctx, connect.NewRequest(req))
		if err == nil {
			resp = r.Msg
		}
		return err
	})
	return resp, err
}

// Renew renews the grant of lock name held by session, whose secret is
// secret, for another process than the one holding it (fenced renew): the
// server keeps it for at least ttl from when it applies the renewal, and
// ttl becomes the TTL of the session (0 keeps it). The grant keeps its
// token; Renew returns it with the TTL now in force. It fails with an
// error wrapping ErrNotOwned when the session does not hold the lock
// (nothing changes), fence.ErrNotOwner for a wrong secret and
// fence.ErrSessionNotFound when the session is gone or expiring. A
// program holding the Lease uses Lease.Renew, which also moves its
// ValidUntil.
func (c *Client) Renew(ctx context.Context, name string, session uint64, secret string, ttl time.Duration) (fence.Grant, error) {
	if err := fence.ValidateName(name); err != nil {
		return fence.Grant{}, fmt.Errorf("client: renew: %w", err)
	}
	if session == 0 {
		return fence.Grant{}, fmt.Errorf("client: renew %q: %w: session is 0; give the session id the grant was made to", name, fence.ErrInvalidArgument)
	}
	if ttl != 0 {
		if err := fence.ValidateTTL(ttl); err != nil {
			return fence.Grant{}, fmt.Errorf("client: renew %q: %w", name, err)
		}
	}
	resp, err := renewGrant(ctx, c, &fencedv1.RenewRequest{Name: name, Session: session, Secret: secret, TtlMs: ttl.Milliseconds()})
	switch {
	case err != nil:
		return fence.Grant{}, fmt.Errorf("client: renew %q: %w", name, err)
	case resp.GetResult() != fencedv1.RenewResult_RENEW_RESULT_RENEWED:
		return fence.Grant{}, fmt.Errorf("client: renew %q: %w: session %d does not hold it; nothing changed", name, ErrNotOwned, session)
	}
	return grantOf(resp.GetGrant(), session, ttl), nil
}
