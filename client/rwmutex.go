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

// RWMutex is a fair read/write lock held through a session: any number of
// sessions hold it for reading together, one session holds it for
// writing alone. Requests of both modes wait in one FIFO queue on the
// server, so a waiting writer holds back every reader that asks after it
// (a stream of readers cannot starve a writer), and the readers queued
// together behind a writer are admitted together when it leaves. Every
// grant, read or write, has its own fencing token (RWGrant.Token); a
// writer's token is above the token of every reader it followed, so a
// resource that checks tokens rejects a late write made under an older
// grant (see docs/rwlock.md for what read grants' tokens can and cannot
// fence).
//
// A session holds one grant of a name, in one mode: there is no upgrade
// from read to write (two readers that both waited to upgrade would each
// wait for the other to leave) and no downgrade. Unlock, then ask again.
// RWMutexes of one session with the same name share that one grant; use
// one session per independent holder.
//
// The read/write lock is apart from a Mutex of the same name.
//
// RLock, Lock, their Try forms and Unlock of one RWMutex are meant to be
// called one at a time; the RWGrant they return is safe to use from any
// goroutine.
type RWMutex struct {
	s    *Session
	name string

	mu   sync.Mutex
	held *RWGrant // nil when none
}

// RWGrant is a read or write grant of an RWMutex. Its ValidUntil and
// Remaining are its session's.
type RWGrant struct {
	validity // the session's
	grant    fence.Grant
	ctx      context.Context
	cancel   context.CancelCauseFunc
}

// NewRWMutex returns an RWMutex for the read/write lock name held through
// session s. It does not contact the server; the name is checked by
// RLock and Lock.
func NewRWMutex(s *Session, name string) *RWMutex {
	return &RWMutex{s: s, name: name}
}

// Name returns the read/write lock's name.
func (m *RWMutex) Name() string { return m.name }

// RLock takes a read grant, waiting in the server's FIFO queue while a
// writer holds the lock or any request waits ahead (a waiting writer
// comes first). The grant is pushed to the waiting call; there is no
// polling. Its outcomes, retries and the promise that a failed RLock
// leaves nothing behind on the server are those of Mutex.Lock. If this
// RWMutex already holds a read grant, RLock returns it at once; if it
// holds a write grant, RLock fails with an error wrapping
// fence.ErrInvalidArgument (no downgrade).
func (m *RWMutex) RLock(ctx context.Context) (*RWGrant, error) {
	return m.acquire(ctx, false, true)
}

// Lock takes the write grant, waiting in the same queue until no one
// holds the lock and every request ahead was served. The rest is as for
// RLock; if this RWMutex holds a read grant, Lock fails with an error
// wrapping fence.ErrInvalidArgument (no upgrade: Unlock first).
func (m *RWMutex) Lock(ctx context.Context) (*RWGrant, error) {
	return m.acquire(ctx, true, true)
}

// TryRLock takes a read grant only if it can be had at once (no writer
// holds the lock and no one waits); otherwise it returns an error
// wrapping fence.ErrNotGranted, as Mutex.TryLock.
func (m *RWMutex) TryRLock(ctx context.Context) (*RWGrant, error) {
	return m.acquire(ctx, false, false)
}

// TryLock takes the write grant only if the lock is free and no one waits;
// otherwise it returns an error wrapping fence.ErrNotGranted.
func (m *RWMutex) TryLock(ctx context.Context) (*RWGrant, error) {
	return m.acquire(ctx, true, false)
}

func (m *RWMutex) acquire(ctx context.Context, write, wait bool) (*RWGrant, error) {
	op := rwOp(write, wait)
	if err := fence.ValidateName(m.name); err != nil {
		return nil, fmt.Errorf("client: %s: %w", op, err)
	}
	s := m.s
	if err := s.usable(op, m.name); err != nil {
		return nil, err
	}
	if g := m.current(); g != nil {
		if g.Write() != write {
			return nil, fmt.Errorf("client: %s %q: %w: this RWMutex holds a %s grant; a read/write lock offers no upgrade or downgrade: Unlock first",
				op, m.name, fence.ErrInvalidArgument, g.grant.Kind)
		}
		return g, nil
	}
	mode := fencedv1.RWLockMode_RW_LOCK_MODE_READ
	if write {
		mode = fencedv1.RWLockMode_RW_LOCK_MODE_WRITE
	}
	var resp *fencedv1.RWAcquireResponse
	seq, err := s.acquire(ctx, op, m.name, wait, func(ctx context.Context, ep *endpoint, seq uint64, waitFor time.Duration) (error, error) {
		r, err := ep.rwlockAcquire(ctx, &fencedv1.RWAcquireRequest{
			Name: m.name, Mode: mode, Session: s.id, Secret: s.secret, Seq: seq, WaitMs: waitFor.Milliseconds(),
		})
		if err != nil {
			return nil, err
		}
		resp = r
		if resp.GetGranted() {
			return nil, nil
		}
		if h := resp.GetHolder(); h != 0 {
			return fmt.Errorf("session %d holds it, or requests wait ahead", h), nil
		}
		return errors.New("held, or requests wait ahead (with an auth file the server names the holder only to identities with read on the lock)"), nil
	}, m.withdraw)
	if err != nil {
		return nil, err
	}
	grant := grantOf(resp.GetGrant(), s.id, s.ttl)
	gctx, cancel, err := s.hold(ctx, op, m.name, seq, grant, m.withdraw)
	if err != nil {
		return nil, err
	}
	g := &RWGrant{validity: validity{s}, grant: grant, ctx: gctx, cancel: cancel}
	m.mu.Lock()
	if m.held != nil {
		m.held.cancel(ErrNotHeld)
	}
	m.held = g
	m.mu.Unlock()
	return g, nil
}

func rwOp(write, wait bool) string {
	switch {
	case write && wait:
		return "write lock"
	case write:
		return "try write lock"
	case wait:
		return "read lock"
	}
	return "try read lock"
}

// current returns the grant held and still trusted, or nil.
func (m *RWMutex) current() *RWGrant {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held != nil && m.held.ctx.Err() == nil {
		return m.held
	}
	return nil
}

// withdraw withdraws m's acquire seq if it may have reached the server.
func (m *RWMutex) withdraw(ctx context.Context, seq uint64, sent bool) {
	if !sent {
		return
	}
	m.s.c.withdraw(ctx, &fencedv1.RWReleaseRequest{Name: m.name, Session: m.s.id, WithdrawSeq: seq, Secret: m.s.secret}, m.s.ctx, time.Time{})
}

// Unlock releases the grant this RWMutex holds, read or write. Its
// Context is cancelled first, with ErrNotHeld as the cause, so that work
// under it stops before a writer can start. The outcomes are those of
// Mutex.Unlock: nil when released or not held, an error wrapping
// ErrNotOwned when only other sessions hold the lock, the session's Err
// after it was lost (the work done under the grant may have overlapped a
// writer's).
func (m *RWMutex) Unlock(ctx context.Context) error {
	m.mu.Lock()
	if m.held != nil {
		m.held.cancel(ErrNotHeld)
	}
	m.held = nil
	m.mu.Unlock()
	s := m.s
	return s.unlock(ctx, m.name, func(ctx context.Context) (fencedv1.ReleaseResult, error) {
		seq := s.nextSeq()
		var res fencedv1.ReleaseResult
		err := s.c.retry(ctx, "release", s.c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
			r, err := ep.rwlockRelease(ctx, &fencedv1.RWReleaseRequest{Name: m.name, Session: s.id, Seq: seq, Secret: s.secret})
			if err == nil {
				res = r.GetResult()
			}
			return err
		})
		return res, err
	})
}

// Token returns the grant's fencing token: send it with every operation
// on the protected resource.
func (g *RWGrant) Token() fence.Token { return g.grant.Token }

// Grant returns the grant: kind fence.KindRead or fence.KindWrite, scope
// the lock's name.
func (g *RWGrant) Grant() fence.Grant { return g.grant }

// Write reports whether this is the write grant.
func (g *RWGrant) Write() bool { return g.grant.Kind == fence.KindWrite }

// Context returns a context for the work done under the grant. It is
// cancelled when the grant is lost or uncertain (its cause wraps
// fence.ErrLockLost, see Session.Err), when the session is closed, and by
// Unlock (cause ErrNotHeld).
func (g *RWGrant) Context() context.Context { return g.ctx }

// Done is closed when the grant's Context is cancelled.
func (g *RWGrant) Done() <-chan struct{} { return g.ctx.Done() }

// Err returns why the grant ended (the cause of its Context), nil while
// it is held.
func (g *RWGrant) Err() error {
	if g.ctx.Err() == nil {
		return nil
	}
	return context.Cause(g.ctx)
}

// RWLockState is a read/write lock as the server describes it.
type RWLockState struct {
	// Name is the lock's name.
	Name string
	// Readers are the read grants in the order they were admitted.
	Readers []fence.Grant
	// Writer is the write grant; its Token is 0 when no writer holds it.
	Writer fence.Grant
	// Waiters are the queued requests in the order they will be admitted.
	Waiters []RWWaiter
	// WaiterCount is the number of waiters (Waiters lists at most the
	// first 1000).
	WaiterCount int
}

// RWWaiter is a queued read/write lock request.
type RWWaiter struct {
	// Session is the waiting session.
	Session uint64
	// Write is true for a writer.
	Write bool
}

// DescribeRWLock returns the read/write lock name: its readers and writer
// with their tokens and the first 1000 waiters in order with their modes.
// It is a linearizable read on the leader.
func (c *Client) DescribeRWLock(ctx context.Context, name string) (RWLockState, error) {
	if err := fence.ValidateName(name); err != nil {
		return RWLockState{}, fmt.Errorf("client: describe read/write lock: %w", err)
	}
	var resp *fencedv1.RWDescribeResponse
	err := c.retry(ctx, "describe read/write lock", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		r, err := ep.rwlocks.Describe(ctx, connect.NewRequest(&fencedv1.RWDescribeRequest{Name: name}))
		if err == nil {
			resp = r.Msg
		}
		return err
	})
	if err != nil {
		return RWLockState{}, fmt.Errorf("client: describe read/write lock %q: %w", name, err)
	}
	l := resp.GetLock()
	out := RWLockState{Name: l.GetName(), WaiterCount: int(l.GetWaiterCount())}
	for _, g := range l.GetReaders() {
		out.Readers = append(out.Readers, grantOf(g, 0, 0))
	}
	if w := l.GetWriter(); w != nil {
		out.Writer = grantOf(w, 0, 0)
	}
	for _, w := range l.GetWaiters() {
		out.Waiters = append(out.Waiters, RWWaiter{Session: w.GetSession(), Write: w.GetMode() == fencedv1.RWLockMode_RW_LOCK_MODE_WRITE})
	}
	return out, nil
}
