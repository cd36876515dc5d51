package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	fence "github.com/fenced-dev/fenced"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// The acquire protocol every primitive of a session shares (Mutex,
// RWMutex): the promises are those documented on Mutex.Lock.

// sendAcquire makes one attempt of an acquire for the request seq, waiting
// up to waitFor in the server's queue (0: try once). When the server
// answered, refused is why it did not grant the request ("held by session
// 3"; wrapped by the "not granted" error), nil when it granted it.
type sendAcquire func(ctx context.Context, ep *endpoint, seq uint64, waitFor time.Duration) (refused error, err error)

// usable returns the error that keeps op on name from starting: a Client
// closed or a session lost or closed.
func (s *Session) usable(op, name string) error {
	if err := s.c.closed(); err != nil {
		return fmt.Errorf("client: %s %q: %w", op, name, err)
	}
	if err := s.Err(); err != nil {
		return fmt.Errorf("client: %s %q: %w", op, name, err)
	}
	return nil
}

// acquire runs op on name: each round sends a request of a new seq with
// send, retried under that seq on network failures; a wait that ran out
// with ctx alive starts a new round. Whenever it gives up on a request
// that may have reached the server (ctx ended, the session lost, a late
// grant, a try answered after retries) it withdraws it with withdraw,
// so nothing is left behind. It returns the seq of the granted request,
// whose grant the caller takes (see hold).
func (s *Session) acquire(ctx context.Context, op, name string, wait bool, send sendAcquire, withdraw func(ctx context.Context, seq uint64, sent bool)) (uint64, error) {
	c := s.c
	// cctx also ends when the session is lost, which it is when the Client
	// closes (Close loses every session).
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(context.Canceled)
	stop := context.AfterFunc(s.ctx, func() { cancel(context.Cause(s.ctx)) })
	defer stop()

	for {
		seq := s.nextSeq()
		var waitFor time.Duration
		if wait {
			waitFor = maxWaitChunk
			if dl, ok := ctx.Deadline(); ok {
				// Leave time for the server's "not granted" to come back
				// before ctx ends.
				left := dl.Sub(time.Now())
				waitFor = min(waitFor, left-min(left/10, 250*time.Millisecond))
			}
			waitFor = max(waitFor, 0)
		}
		var refused error
		sends := 0 // attempts the server may have seen
		err := c.retry(cctx, op, waitFor+c.requestTimeout, func(actx context.Context, ep *endpoint) error {
			r, err := send(actx, ep, seq, waitFor)
			if !errors.Is(err, errNotSent) {
				sends++
			}
			refused = r
			return err
		})
		sent := sends > 0
		// From here on, every return without a grant after the caller gave
		// up (ctx ended, session lost) withdraws seq if it was sent: its
		// outcome may be unknown, or a copy of it may still be on its way.
		switch {
		case err != nil && ctx.Err() == nil && s.Err() != nil:
			withdraw(ctx, seq, sent)
			return 0, fmt.Errorf("client: %s %q: %w", op, name, s.Err())
		case err != nil && ctx.Err() != nil:
			withdraw(ctx, seq, sent)
			return 0, fmt.Errorf("client: %s %q: %w", op, name, ctx.Err())
		case err != nil:
			if errors.Is(err, fence.ErrSessionNotFound) {
				s.lose(fmt.Errorf("%w: session %d: %w", fence.ErrLockLost, s.id, err), false)
			}
			if errors.Is(err, ErrClosed) {
				return 0, fmt.Errorf("client: %s %q: %w", op, name, ErrClosed)
			}
			return 0, fmt.Errorf("client: %s %q: %w", op, name, err)
		case refused == nil:
			if ctx.Err() != nil {
				withdraw(ctx, seq, true)
				return 0, fmt.Errorf("client: %s %q: %w", op, name, ctx.Err())
			}
			return seq, nil
		case !wait:
			if sends > 1 {
				// An earlier attempt may still be on its way, and the
				// server would apply it as a new try: withdraw it.
				withdraw(ctx, seq, true)
			}
			return 0, fmt.Errorf("client: %s %q: %w: %w", op, name, fence.ErrNotGranted, refused)
		case ctx.Err() != nil:
			// The server answered "not granted" and dropped the wait; an
			// earlier attempt of seq may still be on its way.
			withdraw(ctx, seq, true)
			return 0, fmt.Errorf("client: %s %q: %w", op, name, ctx.Err())
		}
		// The wait ran out with ctx alive: queue again. The outcome was
		// certain, so a new seq is right, and it keeps the retried seq
		// within the server's de-duplication window.
	}
}

// hold makes the context of grant g, obtained by the acquire seq on name:
// a child of the session's, cancelled when the session is lost. If the
// session's validity ran out before the grant arrived, or the session was
// lost meanwhile, the acquire is withdrawn and hold fails with an error
// wrapping fence.ErrLockLost.
func (s *Session) hold(ctx context.Context, op, name string, seq uint64, g fence.Grant, withdraw func(ctx context.Context, seq uint64, sent bool)) (context.Context, context.CancelCauseFunc, error) {
	if err := s.taken(ctx, op, name, seq, g, withdraw); err != nil {
		return nil, nil, err
	}
	gctx, cancel := context.WithCancelCause(s.ctx)
	if gctx.Err() != nil {
		// Lost between the check and now.
		cancel(nil)
		withdraw(ctx, seq, true)
		return nil, nil, fmt.Errorf("client: %s %q: %w", op, name, context.Cause(gctx))
	}
	return gctx, cancel, nil
}

// taken checks that grant g, obtained by the acquire seq on name, may be
// taken: the session's validity had not run out when it arrived and the
// session is not lost. If not, the acquire is withdrawn and taken fails
// with an error wrapping fence.ErrLockLost (or the session's Err). A
// grant taken without a context of its own yet (Mutex makes its context
// on first use, a child of the session's then) is as trusted as one with.
func (s *Session) taken(ctx context.Context, op, name string, seq uint64, g fence.Grant, withdraw func(ctx context.Context, seq uint64, sent bool)) error {
	if !s.valid() {
		s.c.hooks.lateGrant(name, s.id, g.Token)
		withdraw(ctx, seq, true)
		return fmt.Errorf("client: %s %q: %w: granted with token %d after session %d's validity ran out; released",
			op, name, fence.ErrLockLost, g.Token, s.id)
	}
	if s.ctx.Err() != nil {
		// Lost between the check and now.
		withdraw(ctx, seq, true)
		return fmt.Errorf("client: %s %q: %w", op, name, context.Cause(s.ctx))
	}
	return nil
}

// unlock releases the grant of name with release (one request of a new
// seq, retried under it) after the caller stopped trusting it. After the
// session was closed it returns nil without a request: Close released
// everything. After the session was lost it still asks the server to
// release the grant, best effort for at most the request timeout, and
// returns the session's Err. A release answered not_owned returns an
// error wrapping ErrNotOwned.
func (s *Session) unlock(ctx context.Context, name string, release func(ctx context.Context) (fencedv1.ReleaseResult, error)) error {
	if err := fence.ValidateName(name); err != nil {
		return fmt.Errorf("client: unlock: %w", err)
	}
	c := s.c
	switch err := s.Err(); {
	case errors.Is(err, ErrSessionClosed):
		return nil
	case err != nil:
		if c.closed() == nil {
			rctx, cancel := c.cleanup(ctx)
			if _, rerr := release(rctx); rerr != nil {
				c.log.Info("fenced: could not release the grant of a lost session", "name", name, "session", s.id, "err", rerr)
			}
			cancel()
		}
		return fmt.Errorf("client: unlock %q: %w", name, err)
	}
	// Not cut by the Client's Close on its own: a call then fails with
	// ErrClosed (the Client's streams end, and no new one opens).
	res, err := release(ctx)
	if err != nil {
		return fmt.Errorf("client: unlock %q: %w", name, err)
	}
	if res == fencedv1.ReleaseResult_RELEASE_RESULT_NOT_OWNED {
		return fmt.Errorf("client: unlock %q: %w", name, ErrNotOwned)
	}
	return nil
}
