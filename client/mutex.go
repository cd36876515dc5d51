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

// maxWaitChunk bounds one Acquire call's wait when the caller's context
// has no deadline. The server drops a waiter when its call ends, so each
// re-issued call joins the back of the queue: chunks are long so that this
// rarely matters.
const maxWaitChunk = 5 * time.Minute

// Mutex is an exclusive lock held by a session. Every grant carries a
// fencing token; send it with every write to the protected resource (see
// Token) and do the work under Context, which is cancelled when the grant
// can no longer be trusted.
//
// Mutexes of one session with the same name share one grant: the server
// hands a session that already holds a lock the grant it holds. Use one
// session per independent holder.
//
// Token, Grant and Context are safe to call from any goroutine; Lock,
// TryLock and Unlock of one Mutex are meant to be called one at a time.
type Mutex struct {
	validity // the session's: ValidUntil and Remaining
	s        *Session
	name     string
	opts     lockOptions
	optsErr  error

	mu    sync.Mutex
	grant fence.Grant // zero when not held
	// ctx is the grant's context, made by the first Context call of the
	// grant (nil until then, while a grant is held): a child of the
	// session's, so cancelled with it, and by Unlock or the next grant.
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// notHeld is the Context of a Mutex or Lease that holds no grant.
var notHeld = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(ErrNotHeld)
	return ctx
}()

// NewMutex returns a Mutex for the lock name held through session s, with
// opts for its grants (WithLockDelay). It does not contact the server; the
// name and options are checked by Lock and TryLock. Its ValidUntil and
// Remaining are its session's.
func NewMutex(s *Session, name string, opts ...LockOption) *Mutex {
	o, err := lockOptionsOf(opts)
	return &Mutex{validity: validity{s}, s: s, name: name, opts: o, optsErr: err, ctx: notHeld}
}

// Name returns the lock's name.
func (m *Mutex) Name() string { return m.name }

// Lock acquires the lock, waiting in the server's FIFO queue while another
// session holds it. The server pushes the grant to the waiting call; there
// is no polling. A call that fails on the network or times out is retried
// with the same sequence number, so the server applies it once; a call
// whose wait ran out is made again, while ctx is alive.
//
// If ctx ends first, Lock returns an error wrapping ctx's error; if the
// session is lost while waiting, an error wrapping the session's Err. A
// grant whose reply arrives after the session's validity ran out is not
// taken: Lock returns an error wrapping fence.ErrLockLost. If this Mutex
// already holds the lock, Lock returns nil at once.
//
// A Lock that fails in these ways leaves nothing behind on the server,
// however far its acquire got, and the Mutex takes no grant (Token, Grant
// and Context stay as they were: 0, zero and cancelled for a Mutex that
// held nothing):
//   - cancelled before it was sent: it is not sent;
//   - cancelled in flight, while waiting in the queue, or after the server
//     granted it but before the reply came back: before Lock returns, the
//     SDK withdraws the acquire with a release that names its sequence
//     number, which the server applies as if after the acquire, whichever
//     of the two reaches it first: the grant is released, the wait ended,
//     or the acquire refused when it arrives.
//
// Another session can then take the lock at once. Lock waits for the
// withdrawal's answer for at most the request timeout; if the server
// cannot be reached by then, Lock returns anyway and the SDK goes on
// withdrawing in the background until the server answers or the session
// ends (the server then releases the session's locks when its TTL runs
// out). The withdrawal never touches a later grant of the lock; but
// Mutexes of one session with the same name share one grant, so it
// releases the grant another such Mutex holds.
func (m *Mutex) Lock(ctx context.Context) error { return m.acquire(ctx, true) }

// TryLock acquires the lock if it is free, without waiting. It returns an
// error wrapping fence.ErrNotGranted when another session holds it. Network
// failures are retried, with the same sequence number, until ctx ends; the
// other outcomes are those of Lock, and so is the promise that a TryLock
// that fails because ctx ended or the session was lost leaves nothing
// behind. A "not granted" after retries leaves nothing behind either: an
// earlier attempt still on its way would be applied as a new try, so
// TryLock withdraws the acquire before it returns.
func (m *Mutex) TryLock(ctx context.Context) error { return m.acquire(ctx, false) }

func (m *Mutex) acquire(ctx context.Context, wait bool) error {
	op := "try lock"
	if wait {
		op = "lock"
	}
	if err := errors.Join(fence.ValidateName(m.name), m.optsErr); err != nil {
		return fmt.Errorf("client: %s: %w", op, err)
	}
	s := m.s
	if err := s.usable(op, m.name); err != nil {
		return err
	}
	if m.held() {
		return nil
	}
	var resp *fencedv1.AcquireResponse
	seq, err := s.acquire(ctx, op, m.name, wait, func(ctx context.Context, ep *endpoint, seq uint64, waitFor time.Duration) (error, error) {
		r, err := ep.acquire(ctx, &fencedv1.AcquireRequest{
			Name:    m.name,
			Session: s.id,
			Secret:  s.secret,
			Seq:     seq,
			WaitMs:  waitFor.Milliseconds(),

			LockDelayMs: m.opts.lockDelayMs,
		})
		resp = r
		if err != nil || r.GetGranted() {
			return nil, err
		}
		return notGrantedReason(r), nil
	}, m.withdraw)
	if err != nil {
		return err
	}
	return m.take(ctx, seq, resp.GetGrant())
}

// take records the grant of the acquire seq, unless the session's
// validity ran out before it arrived: then the acquire is withdrawn and
// Lock fails.
func (m *Mutex) take(ctx context.Context, seq uint64, g *fencedv1.Grant) error {
	grant := grantOf(g, m.s.id, m.s.ttl)
	if err := m.s.taken(ctx, "lock", m.name, seq, grant, m.withdraw); err != nil {
		return err
	}
	m.mu.Lock()
	if m.cancel != nil {
		m.cancel(ErrNotHeld)
	}
	// The grant's context is made when first asked for (Context): most
	// callers never ask, and one that does gets a child of the session's
	// context then, cancelled at once if the session was lost meanwhile.
	m.grant, m.ctx, m.cancel = grant, nil, nil
	m.mu.Unlock()
	return nil
}

// held reports whether the Mutex holds a grant that is still trusted.
func (m *Mutex) held() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.grant.Token == 0 {
		return false
	}
	if m.ctx == nil { // a grant whose context was not asked for yet
		return m.s.ctx.Err() == nil
	}
	return m.ctx.Err() == nil
}

// contextLocked returns the grant's context, making it if it has none
// yet. Call with m.mu held.
func (m *Mutex) contextLocked() context.Context {
	if m.ctx == nil {
		m.ctx, m.cancel = context.WithCancelCause(m.s.ctx)
	}
	return m.ctx
}

// release sends one Release, retried with one seq.
func (m *Mutex) release(ctx context.Context) (fencedv1.ReleaseResult, error) {
	return releaseLock(ctx, m.s.c, m.name, m.s.id, m.s.secret, m.s.nextSeq())
}

// releaseLock releases name held by session, whose secret is secret, with
// the request seq.
func releaseLock(ctx context.Context, c *Client, name string, session uint64, secret string, seq uint64) (fencedv1.ReleaseResult, error) {
	var res fencedv1.ReleaseResult
	err := c.retry(ctx, "release", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		r, err := ep.release(ctx, &fencedv1.ReleaseRequest{Name: name, Session: session, Seq: seq, Secret: secret})
		if err == nil {
			res = r.GetResult()
		}
		return err
	})
	return res, err
}

// Unlock releases the lock. The Context of the grant is cancelled first,
// with ErrNotHeld as its cause, so that work under it stops before the
// next holder can start. Network failures are retried, with the same
// sequence number, until ctx ends.
//
// Unlock returns nil when the server released the lock or the session did
// not hold it, and an error wrapping ErrNotOwned when another session
// holds it. After the session was closed, Unlock returns nil without a
// request: Close released everything. After the session was lost, Unlock
// still asks the server to release the lock (for at most the request
// timeout) and returns the session's Err, which wraps fence.ErrLockLost:
// the work done under the grant may have overlapped the next holder's.
func (m *Mutex) Unlock(ctx context.Context) error {
	m.mu.Lock()
	if m.cancel != nil {
		m.cancel(ErrNotHeld)
	}
	m.grant, m.ctx, m.cancel = fence.Grant{}, notHeld, nil
	m.mu.Unlock()

	return m.s.unlock(ctx, m.name, m.release)
}

// Token returns the fencing token of the grant the last successful Lock
// or TryLock obtained, and 0 before that and after Unlock. It keeps
// returning the token after the grant was lost: a resource that has seen a
// newer token rejects it.
func (m *Mutex) Token() fence.Token {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.grant.Token
}

// Grant returns the grant the last successful Lock or TryLock obtained,
// and the zero Grant before that and after Unlock.
func (m *Mutex) Grant() fence.Grant {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.grant
}

// Context returns a context for the work done under the current grant. It
// is cancelled when the grant is lost or uncertain (its cause wraps
// fence.ErrLockLost, see Session.Err), when the session is closed, and by
// Unlock (cause ErrNotHeld). Before the first Lock and after Unlock it is
// already cancelled. Each grant has its own context: call Context again
// after Lock.
func (m *Mutex) Context() context.Context {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.contextLocked()
}

// grantOf converts a grant from the API.
func grantOf(g *fencedv1.Grant, session uint64, ttl time.Duration) fence.Grant {
	out := fence.Grant{
		Name:    g.GetName(),
		Kind:    fence.Kind(g.GetKind()),
		Scope:   g.GetScope(),
		Token:   fence.Token(g.GetToken()),
		Issuer:  g.GetIssuer(),
		Session: g.GetSession(),
		TTL:     time.Duration(g.GetTtlMs()) * time.Millisecond,
		Signed:  g.GetSigned(),
	}
	if out.Session == 0 {
		out.Session = session
	}
	if out.TTL == 0 {
		out.TTL = ttl
	}
	if out.Kind == "" { // a server that predates kinds grants locks
		out.Kind = fence.KindLock
	}
	if out.Scope == "" {
		out.Scope = out.Name
	}
	if ms := g.GetIssuedAtUnixMs(); ms != 0 {
		out.IssuedAt = time.UnixMilli(ms).UTC()
	}
	return out
}
