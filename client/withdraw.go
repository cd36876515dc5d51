package client

import (
	"context"
	"errors"
	"time"

	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// withdrawal is a release whose withdraw_seq names an acquire to undo:
// the lock's ReleaseRequest, the semaphore's SemaphoreReleaseRequest or
// the read/write lock's RWReleaseRequest.
type withdrawal interface {
	GetName() string
	GetSession() uint64
	GetWithdrawSeq() uint64
}

// withdraw undoes an acquire whose caller gave up on it (ctx ended, the
// session was lost, or the grant came too late) by sending req, a release
// whose withdraw_seq names the acquire. The server applies it as if after
// the acquire, whichever of the two reaches the state machine first, so
// nothing the acquire did is left behind: its grant is released, its wait
// ended, or, when it arrives later, it is refused. A plain release could
// be overtaken by the acquire still in flight, and leave it granted.
//
// withdraw waits for the server's answer for at most the request timeout
// (ctx may have ended). If none came, it goes on trying in the background
// until the server answers, stop ends, the time until passes (if not
// zero) or the Client is closed: a withdrawal undoes that one acquire and
// never a later grant, and applying it again changes nothing, so it is
// safe late and sent more than once (it carries no seq).
func (c *Client) withdraw(ctx context.Context, req withdrawal, stop context.Context, until time.Time) {
	if c.closed() != nil {
		return
	}
	rctx, cancel := c.cleanup(ctx)
	err := c.sendWithdraw(rctx, req)
	cancel()
	if err == nil {
		return
	}
	if !errors.Is(err, context.DeadlineExceeded) || stop.Err() != nil ||
		!c.goRun(func() { c.withdrawInBackground(context.WithoutCancel(ctx), req, stop, until) }) {
		c.log.Info("fenced: could not withdraw an abandoned acquire", "name", req.GetName(), "session", req.GetSession(), "seq", req.GetWithdrawSeq(), "err", err)
	}
}

// withdrawInBackground retries a withdrawal until the server answers, stop
// ends, until passes or the Client is closed.
func (c *Client) withdrawInBackground(ctx context.Context, req withdrawal, stop context.Context, until time.Time) {
	bctx, cancel := c.until(ctx, until, context.DeadlineExceeded)
	defer cancel()
	stopAfter := context.AfterFunc(stop, cancel)
	defer stopAfter()
	if err := c.sendWithdraw(bctx, req); err != nil {
		c.log.Info("fenced: gave up withdrawing an abandoned acquire", "name", req.GetName(), "session", req.GetSession(), "seq", req.GetWithdrawSeq(), "err", err)
	}
}

// sendWithdraw sends a withdrawal, retried until ctx ends.
func (c *Client) sendWithdraw(ctx context.Context, req withdrawal) error {
	return c.retry(ctx, "withdraw", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		var err error
		switch r := req.(type) {
		case *fencedv1.ReleaseRequest:
			_, err = ep.release(ctx, r)
		case *fencedv1.SemaphoreReleaseRequest:
			_, err = ep.semaphoreRelease(ctx, r)
		case *fencedv1.RWReleaseRequest:
			_, err = ep.rwlockRelease(ctx, r)
		}
		return err
	})
}

// withdraw withdraws m's acquire seq if it may have reached the server
// (sent); the background retries stop when the session ends.
func (m *Mutex) withdraw(ctx context.Context, seq uint64, sent bool) {
	if !sent {
		return
	}
	m.s.c.withdraw(ctx, &fencedv1.ReleaseRequest{Name: m.name, Session: m.s.id, WithdrawSeq: seq, Secret: m.s.secret}, m.s.ctx, time.Time{})
}
