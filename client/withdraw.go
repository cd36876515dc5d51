package client

import (
	"context"
	"errors"
	"time"

	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// withdraw undoes the acquire seq of m after its caller gave up on it
// (ctx ended, the session was lost, or the grant came too late), if the
// acquire may have reached the server (sent). It sends a Release whose
// withdraw_seq is seq: the server applies it as if after the acquire,
// whichever of the two reaches the state machine first, so nothing the
// acquire did is left behind: its grant is released, its wait ended, or,
// when it arrives later, it is refused. Releasing instead could be
// overtaken by the acquire still in flight.
//
// withdraw waits for the server's answer for at most the request timeout
// (ctx may have ended). If none came, it goes on trying in the background
// until the server answers, the session ends or the Client is closed: the
// withdrawal undoes that one acquire and never a later grant, so applying
// it late is safe. The release carries seq 0: a withdrawal is idempotent,
// and it uses no slot of the session's de-duplication window.
func (m *Mutex) withdraw(ctx context.Context, seq uint64, sent bool) {
	c, s := m.s.c, m.s
	if !sent || c.closed() != nil {
		return
	}
	rctx, cancel := c.cleanup(ctx)
	err := m.sendWithdraw(rctx, seq)
	cancel()
	if err == nil {
		return
	}
	if !errors.Is(err, context.DeadlineExceeded) || s.ctx.Err() != nil ||
		!c.goRun(func() { m.withdrawInBackground(context.WithoutCancel(ctx), seq) }) {
		c.log.Info("fenced: could not withdraw an abandoned acquire", "lock", m.name, "session", s.id, "seq", seq, "err", err)
	}
}

// withdrawInBackground retries the withdrawal of seq until the server
// answers, the session ends or the Client is closed.
func (m *Mutex) withdrawInBackground(ctx context.Context, seq uint64) {
	c, s := m.s.c, m.s
	bctx, cancel := c.until(ctx, time.Time{}, nil)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	if err := m.sendWithdraw(bctx, seq); err != nil {
		c.log.Info("fenced: gave up withdrawing an abandoned acquire", "lock", m.name, "session", s.id, "seq", seq, "err", err)
	}
}

// sendWithdraw sends the Release that withdraws the acquire seq, retried
// until ctx ends.
func (m *Mutex) sendWithdraw(ctx context.Context, seq uint64) error {
	c := m.s.c
	return c.retry(ctx, "withdraw", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		_, err := ep.release(ctx, &fencedv1.ReleaseRequest{Name: m.name, Session: m.s.id, WithdrawSeq: seq})
		return err
	})
}
