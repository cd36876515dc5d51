package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// Semaphore is a counting semaphore of a fixed capacity whose permits are
// held through a session (docs/semaphore.md). Each permit has its own
// fencing token and a slot 0..capacity-1, unique among the live permits:
// fence the resource of a slot as the object Permit.Scope() ("name/slot"),
// so that the next holder of a slot fences out a paused earlier one.
//
// The capacity is fixed while any permit of the semaphore is live or
// waited for: an Acquire with another capacity fails with an error
// wrapping fence.ErrCapacityMismatch and changes nothing.
//
// A session holds at most one group of permits of a semaphore at a time
// (one Acquire's); use one session per independent holder. Acquire,
// TryAcquire and Release of one Semaphore are meant to be called one at a
// time.
type Semaphore struct {
	s        *Session
	name     string
	capacity int

	mu   sync.Mutex
	held *Permits // nil when none
}

// Permit is one permit of a semaphore.
type Permit struct {
	// Slot is 0 to capacity-1, unique among the semaphore's live permits.
	Slot int
	// Token is the permit's fencing token (Grant.Token).
	Token fence.Token
	// Grant is the permit's grant.
	Grant fence.Grant
}

// Scope returns the object that fences this permit's slot: "name/slot".
// Send Token with every write to it.
func (p Permit) Scope() string { return p.Grant.Name + "/" + strconv.Itoa(p.Slot) }

// Permits are the permits one Acquire took. Their Context is cancelled
// when they can no longer be trusted (the session was lost or closed) or
// are released.
type Permits struct {
	sem    *Semaphore
	list   []Permit
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// NewSemaphore returns a Semaphore of capacity permits named name, held
// through session s. It does not contact the server; name and capacity
// are checked by Acquire and TryAcquire.
func NewSemaphore(s *Session, name string, capacity int) *Semaphore {
	return &Semaphore{s: s, name: name, capacity: capacity}
}

// Name returns the semaphore's name.
func (m *Semaphore) Name() string { return m.name }

// Acquire takes k permits at once (1 to the capacity), waiting in the
// server's FIFO queue while fewer are free or others wait before it. The
// server pushes the permits to the waiting call; there is no polling. A
// request at the head of the queue is not overtaken by smaller ones behind
// it. A call that fails on the network or times out is retried with the
// same sequence number, so the server applies it once; a call whose wait
// ran out is made again while ctx is alive.
//
// An Acquire that fails because ctx ended or the session was lost leaves
// nothing behind, as Mutex.Lock's does: the acquire is withdrawn (its
// permits released or its wait ended, whichever of the two reached the
// server first). When this Semaphore already holds permits, Acquire
// returns them if there are k, and fails otherwise.
func (m *Semaphore) Acquire(ctx context.Context, k int) (*Permits, error) {
	return m.acquire(ctx, k, true)
}

// TryAcquire takes k permits if they are free and nobody waits, without
// waiting; otherwise it fails with an error wrapping fence.ErrNotGranted.
// Its other outcomes are Acquire's.
func (m *Semaphore) TryAcquire(ctx context.Context, k int) (*Permits, error) {
	return m.acquire(ctx, k, false)
}

func (m *Semaphore) validate(k int) error {
	if err := fence.ValidateName(m.name); err != nil {
		return err
	}
	if m.capacity < 1 || m.capacity > maxCapacity {
		return fmt.Errorf("%w: capacity is %d; a semaphore has 1 to %d permits", fence.ErrInvalidArgument, m.capacity, maxCapacity)
	}
	if k < 1 || k > m.capacity {
		return fmt.Errorf("%w: %d permits asked of a semaphore of capacity %d; ask for 1 to %d", fence.ErrInvalidArgument, k, m.capacity, m.capacity)
	}
	return nil
}

// maxCapacity is the largest capacity of a semaphore (the server's
// fsm.MaxCapacity).
const maxCapacity = 1_000_000

func (m *Semaphore) acquire(ctx context.Context, k int, wait bool) (*Permits, error) {
	op := "try acquire"
	if wait {
		op = "acquire"
	}
	if err := m.validate(k); err != nil {
		return nil, fmt.Errorf("client: %s %q: %w", op, m.name, err)
	}
	c, s := m.s.c, m.s
	if err := c.closed(); err != nil {
		return nil, fmt.Errorf("client: %s %q: %w", op, m.name, err)
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("client: %s %q: %w", op, m.name, err)
	}
	if p := m.current(); p != nil {
		if len(p.list) != k {
			return nil, fmt.Errorf("client: %s %q: %w: this Semaphore holds %d permits; release them first", op, m.name, fence.ErrInvalidArgument, len(p.list))
		}
		return p, nil
	}
	cctx, cancel := c.until(ctx, time.Time{}, nil)
	defer cancel()
	stop := context.AfterFunc(s.ctx, func() { cancel() })
	defer stop()

	for {
		seq := s.nextSeq()
		var waitFor time.Duration
		if wait {
			waitFor = maxWaitChunk
			if dl, ok := ctx.Deadline(); ok {
				left := dl.Sub(time.Now())
				waitFor = min(waitFor, left-min(left/10, 250*time.Millisecond))
			}
			waitFor = max(waitFor, 0)
		}
		var resp *fencedv1.SemaphoreAcquireResponse
		sends := 0 // attempts the server may have seen
		err := c.retry(cctx, op, waitFor+c.requestTimeout, func(actx context.Context, ep *endpoint) error {
			r, err := ep.semaphoreAcquire(actx, &fencedv1.SemaphoreAcquireRequest{
				Name: m.name, Capacity: uint32(m.capacity), Permits: uint32(k),
				Session: s.id, Secret: s.secret, Seq: seq, WaitMs: waitFor.Milliseconds(),
			})
			sends++
			if err == nil {
				resp = r
			}
			return err
		})
		sent := sends > 0
		switch {
		case err != nil && ctx.Err() == nil && s.Err() != nil:
			m.withdraw(ctx, seq, sent)
			return nil, fmt.Errorf("client: %s %q: %w", op, m.name, s.Err())
		case err != nil && ctx.Err() != nil:
			m.withdraw(ctx, seq, sent)
			return nil, fmt.Errorf("client: %s %q: %w", op, m.name, ctx.Err())
		case err != nil:
			if errors.Is(err, fence.ErrSessionNotFound) {
				s.lose(fmt.Errorf("%w: session %d: %w", fence.ErrLockLost, s.id, err), false)
			}
			return nil, fmt.Errorf("client: %s %q: %w", op, m.name, err)
		case resp.GetGranted():
			if ctx.Err() != nil {
				m.withdraw(ctx, seq, true)
				return nil, fmt.Errorf("client: %s %q: %w", op, m.name, ctx.Err())
			}
			return m.take(ctx, seq, resp.GetPermits())
		case !wait:
			if sends > 1 {
				m.withdraw(ctx, seq, true)
			}
			return nil, fmt.Errorf("client: %s %q: %w: %d of %d permits free, %d asked", op, m.name, fence.ErrNotGranted, resp.GetAvailable(), resp.GetCapacity(), k)
		case ctx.Err() != nil:
			m.withdraw(ctx, seq, true)
			return nil, fmt.Errorf("client: %s %q: %w", op, m.name, ctx.Err())
		}
		// The wait ran out with ctx alive: queue again.
	}
}

// take records the permits of the acquire seq, unless the session's
// validity ran out before they arrived: then the acquire is withdrawn.
func (m *Semaphore) take(ctx context.Context, seq uint64, ps []*fencedv1.Permit) (*Permits, error) {
	s := m.s
	if !s.valid() {
		m.withdraw(ctx, seq, true)
		return nil, fmt.Errorf("client: acquire %q: %w: granted after session %d's validity ran out; released", m.name, fence.ErrLockLost, s.id)
	}
	pctx, cancel := context.WithCancelCause(s.ctx)
	if pctx.Err() != nil {
		cancel(nil)
		m.withdraw(ctx, seq, true)
		return nil, fmt.Errorf("client: acquire %q: %w", m.name, context.Cause(pctx))
	}
	p := &Permits{sem: m, ctx: pctx, cancel: cancel}
	for _, pp := range ps {
		g := grantOf(pp.GetGrant(), s.id, s.ttl)
		p.list = append(p.list, Permit{Slot: int(pp.GetSlot()), Token: g.Token, Grant: g})
	}
	m.mu.Lock()
	m.held = p
	m.mu.Unlock()
	return p, nil
}

// current returns the permits held and still trusted, or nil.
func (m *Semaphore) current() *Permits {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held != nil && m.held.ctx.Err() == nil {
		return m.held
	}
	return nil
}

func (m *Semaphore) withdraw(ctx context.Context, seq uint64, sent bool) {
	if !sent {
		return
	}
	m.s.c.withdraw(ctx, &fencedv1.SemaphoreReleaseRequest{Name: m.name, Session: m.s.id, WithdrawSeq: seq, Secret: m.s.secret}, m.s.ctx, time.Time{})
}

// List returns the permits, by slot.
func (p *Permits) List() []Permit { return append([]Permit(nil), p.list...) }

// Context returns a context for the work done under the permits. It is
// cancelled when they are lost or uncertain (its cause wraps
// fence.ErrLockLost, see Session.Err), when the session is closed, and by
// Release (cause ErrNotHeld).
func (p *Permits) Context() context.Context { return p.ctx }

// Done is closed when Context is cancelled.
func (p *Permits) Done() <-chan struct{} { return p.ctx.Done() }

// Release releases the permits. Context is cancelled first, with
// ErrNotHeld as its cause, so that work under it stops before the next
// holders can start. Network failures are retried, with the same sequence
// number, until ctx ends. It returns nil when the server released them or
// the session held none, and an error wrapping ErrNotOwned when the
// session held none while other sessions hold permits (they were lost).
// After the session was lost, Release returns the session's Err.
func (p *Permits) Release(ctx context.Context) error {
	p.cancel(ErrNotHeld)
	m := p.sem
	m.mu.Lock()
	if m.held == p {
		m.held = nil
	}
	m.mu.Unlock()
	c, s := m.s.c, m.s
	switch err := s.Err(); {
	case errors.Is(err, ErrSessionClosed):
		return nil
	case err != nil:
		rctx, cancel := c.cleanup(ctx)
		defer cancel()
		m.release(rctx)
		return fmt.Errorf("client: release %q: %w", m.name, err)
	}
	cctx, cancel := c.until(ctx, time.Time{}, nil)
	defer cancel()
	res, err := m.release(cctx)
	if err != nil {
		return fmt.Errorf("client: release %q: %w", m.name, err)
	}
	if res == fencedv1.ReleaseResult_RELEASE_RESULT_NOT_OWNED {
		return fmt.Errorf("client: release %q: %w", m.name, ErrNotOwned)
	}
	return nil
}

// release sends one Release of every permit the session holds, retried
// with one seq.
func (m *Semaphore) release(ctx context.Context) (fencedv1.ReleaseResult, error) {
	return releasePermits(ctx, m.s.c, m.name, m.s.id, m.s.secret, m.s.nextSeq())
}

// releasePermits releases every permit of semaphore name held by session,
// whose secret is secret, with the request seq.
func releasePermits(ctx context.Context, c *Client, name string, session uint64, secret string, seq uint64) (fencedv1.ReleaseResult, error) {
	var res fencedv1.ReleaseResult
	err := c.retry(ctx, "release", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		r, err := ep.semaphoreRelease(ctx, &fencedv1.SemaphoreReleaseRequest{Name: name, Session: session, Seq: seq, Secret: secret})
		if err == nil {
			res = r.GetResult()
		}
		return err
	})
	return res, err
}

// ReleaseSemaphore releases every permit of semaphore name that session
// holds, for a program that has the session's id and secret but not the
// Session (fenced semaphore release), as Release does for a lock.
func (c *Client) ReleaseSemaphore(ctx context.Context, name string, session uint64, secret string) (ReleaseResult, error) {
	if err := fence.ValidateName(name); err != nil {
		return "", fmt.Errorf("client: %w", err)
	}
	if session == 0 {
		return "", fmt.Errorf("client: %w: session is 0; give the session id the permits were granted to", fence.ErrInvalidArgument)
	}
	res, err := releasePermits(ctx, c, name, session, secret, 0)
	if err != nil {
		return "", err
	}
	return releaseResultOf(res), nil
}

// SemaphoreState describes a semaphore: its capacity (0 when not in use),
// live permits by slot and waiters in the order they will be served.
type SemaphoreState struct {
	Name     string
	Capacity int
	Holders  []Permit
	Waiters  []SemaphoreWaiter
	// Held and WaiterCount count all permits and waiters; Holders and
	// Waiters list at most the first 1000 of each.
	Held, WaiterCount int
}

// SemaphoreWaiter is a queued acquire.
type SemaphoreWaiter struct {
	Session uint64
	Permits int
}

// DescribeSemaphore returns the state of semaphore name (a linearizable
// read on the leader).
func (c *Client) DescribeSemaphore(ctx context.Context, name string) (SemaphoreState, error) {
	if err := fence.ValidateName(name); err != nil {
		return SemaphoreState{}, fmt.Errorf("client: describe semaphore: %w", err)
	}
	var out SemaphoreState
	err := c.retry(ctx, "describe semaphore", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		r, err := ep.semaphores.Describe(ctx, connect.NewRequest(&fencedv1.SemaphoreDescribeRequest{Name: name}))
		if err != nil {
			return err
		}
		m := r.Msg
		out = SemaphoreState{Name: m.GetName(), Capacity: int(m.GetCapacity()), Held: int(m.GetHeld()), WaiterCount: int(m.GetWaiterCount())}
		for _, p := range m.GetHolders() {
			g := grantOf(p.GetGrant(), 0, 0)
			out.Holders = append(out.Holders, Permit{Slot: int(p.GetSlot()), Token: g.Token, Grant: g})
		}
		for _, w := range m.GetWaiters() {
			out.Waiters = append(out.Waiters, SemaphoreWaiter{Session: w.GetSession(), Permits: int(w.GetPermits())})
		}
		return nil
	})
	if err != nil {
		return SemaphoreState{}, fmt.Errorf("client: describe semaphore %q: %w", name, err)
	}
	return out, nil
}
