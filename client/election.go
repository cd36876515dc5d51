package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/internal/wire"
	"github.com/fenced-dev/fenced/internal/wire/wireconnect"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// Errors of elections.
var (
	// ErrElectionNotLeader reports a Proclaim or Resign by an Election that
	// does not lead (it never won, resigned, or lost its session). It
	// comes wrapped together with fence.ErrNotGranted when the server
	// refused it.
	ErrElectionNotLeader = errors.New("client: election: not the leader")
	// ErrElectionNoLeader reports a Leader call on an election nobody
	// leads.
	ErrElectionNoLeader = errors.New("client: election: no leader")
)

// Election is a session's part in the leader election name: it campaigns
// to lead, and while it leads, its term token fences the leader's writes.
// One session leads a name at a time; candidates wait in arrival order;
// each new leader's token is above every token issued before. The shape is
// that of etcd's concurrency.Election, with the term token added.
//
// Leadership lasts as long as the session: when the session is lost
// (renewals unconfirmed until its validity ran out, closed, revoked), the
// Election's Done closes and its Context is cancelled, and the server
// makes the next candidate leader when it ends the session. A paused
// leader may act after it lost; the term token, checked at the resource,
// is what rejects its late writes.
//
// Token, Grant, Done and Context are safe from any goroutine; Campaign,
// Proclaim and Resign of one Election are meant to be called one at a
// time.
type Election struct {
	s    *Session
	name string

	mu     sync.Mutex
	grant  fence.Grant // zero when not leading
	value  string
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// NewElection returns an Election of name for session s. It does not
// contact the server; the name is checked by Campaign.
func NewElection(s *Session, name string) *Election {
	return &Election{s: s, name: name, ctx: notHeld}
}

// Name returns the election's name.
func (e *Election) Name() string { return e.name }

// ElectionState is an election's state: its leader and value, after the
// change of revision Revision.
type ElectionState struct {
	// Name is the election's name.
	Name string
	// Leader is the leader's grant (kind leader, scope the name); its
	// Token, the term token, is 0 when nobody leads.
	Leader fence.Grant
	// Value is the leader's value.
	Value string
	// Revision orders the changes of all elections of the cluster.
	Revision uint64
	// PrevRevision is the revision of the election's change before this
	// one (Observe): the Revision of the state received before it, unless
	// Skipped. 0 for the first state of an observation and after the
	// election had neither leader nor candidate.
	PrevRevision uint64
	// Skipped reports (Observe) that changes before this state were no
	// longer kept by the server and were not delivered.
	Skipped bool
	// Candidates is how many sessions wait to lead (Leader only).
	Candidates int
}

// HasLeader reports whether somebody leads.
func (st ElectionState) HasLeader() bool { return st.Leader.Token != 0 }

// Campaign makes the session a candidate with value and waits, in the
// server's FIFO queue of candidates, until it leads. The server pushes
// the leadership to the waiting call; there is no polling. It returns the
// term token: send it with every write the leader makes. A call that
// fails on the network is retried with the same sequence number, so the
// server applies it once; a wait that ran out is made again while ctx is
// alive (the candidate rejoins the back of the queue: the waits are long,
// so this is rare).
//
// If the Election already leads, Campaign returns its token at once. If
// ctx ends first, Campaign returns an error wrapping ctx's error, and if
// the session is lost, one wrapping the session's Err; either way the SDK
// withdraws the campaign before it returns (a resign naming its sequence
// number, which the server applies as if after the campaign, whichever
// arrives first): the candidacy ends, or a leadership won meanwhile is
// resigned. A leadership whose reply arrives after the session's validity
// ran out is resigned too, and Campaign fails with fence.ErrLockLost.
func (e *Election) Campaign(ctx context.Context, value string) (fence.Token, error) {
	if err := fence.ValidateName(e.name); err != nil {
		return 0, fmt.Errorf("client: campaign: %w", err)
	}
	c, s := e.s.c, e.s
	if err := c.closed(); err != nil {
		return 0, fmt.Errorf("client: campaign %q: %w", e.name, err)
	}
	if err := s.Err(); err != nil {
		return 0, fmt.Errorf("client: campaign %q: %w", e.name, err)
	}
	if g := e.Grant(); g.Token != 0 && e.ctx.Err() == nil {
		return g.Token, nil
	}
	cctx, cancel := c.until(ctx, time.Time{}, nil)
	defer cancel()
	stop := context.AfterFunc(s.ctx, func() { cancel() })
	defer stop()
	for {
		seq := s.nextSeq()
		waitFor := maxWaitChunk
		if dl, ok := ctx.Deadline(); ok {
			left := time.Until(dl)
			waitFor = max(min(waitFor, left-min(left/10, 250*time.Millisecond)), 0)
		}
		var resp *fencedv1.CampaignResponse
		err := c.retry(cctx, "campaign", waitFor+c.requestTimeout, func(actx context.Context, ep *endpoint) error {
			r, err := ep.elections.Campaign(actx, connect.NewRequest(&fencedv1.CampaignRequest{
				Name: e.name, Session: s.id, Secret: s.secret, Seq: seq, Value: []byte(value), WaitMs: max(waitFor.Milliseconds(), 1),
			}))
			if err == nil {
				resp = r.Msg
			}
			return err
		})
		switch {
		case err != nil && ctx.Err() == nil && s.Err() != nil:
			e.withdraw(ctx, seq)
			return 0, fmt.Errorf("client: campaign %q: %w", e.name, s.Err())
		case err != nil && ctx.Err() != nil:
			e.withdraw(ctx, seq)
			return 0, fmt.Errorf("client: campaign %q: %w", e.name, ctx.Err())
		case err != nil:
			if errors.Is(err, fence.ErrSessionNotFound) {
				s.lose(fmt.Errorf("%w: session %d: %w", fence.ErrLockLost, s.id, err), false)
			}
			return 0, fmt.Errorf("client: campaign %q: %w", e.name, err)
		case resp.GetElected():
			if ctx.Err() != nil {
				e.withdraw(ctx, seq)
				return 0, fmt.Errorf("client: campaign %q: %w", e.name, ctx.Err())
			}
			return e.take(ctx, seq, resp.GetGrant(), value)
		case ctx.Err() != nil:
			e.withdraw(ctx, seq)
			return 0, fmt.Errorf("client: campaign %q: %w", e.name, ctx.Err())
		}
		// The wait ran out with ctx alive: campaign again.
	}
}

// take records the leadership won by the campaign seq, unless the
// session's validity ran out before the reply arrived.
func (e *Election) take(ctx context.Context, seq uint64, g *fencedv1.Grant, value string) (fence.Token, error) {
	s := e.s
	grant := grantOf(g, s.id, s.ttl)
	if !s.valid() {
		e.withdraw(ctx, seq)
		return 0, fmt.Errorf("client: campaign %q: %w: elected with token %d after session %d's validity ran out; resigned", e.name, fence.ErrLockLost, grant.Token, s.id)
	}
	lctx, cancel := context.WithCancelCause(s.ctx)
	if lctx.Err() != nil {
		cancel(nil)
		e.withdraw(ctx, seq)
		return 0, fmt.Errorf("client: campaign %q: %w", e.name, context.Cause(lctx))
	}
	e.mu.Lock()
	if e.cancel != nil {
		e.cancel(ErrNotHeld)
	}
	e.grant, e.value, e.ctx, e.cancel = grant, value, lctx, cancel
	e.mu.Unlock()
	return grant.Token, nil
}

// withdraw undoes the campaign seq whose caller gave up on it; the
// background retries stop when the session ends.
func (e *Election) withdraw(ctx context.Context, seq uint64) {
	c, s := e.s.c, e.s
	if c.closed() != nil {
		return
	}
	req := &fencedv1.ResignRequest{Name: e.name, Session: s.id, Secret: s.secret, WithdrawSeq: seq}
	rctx, cancel := c.cleanup(ctx)
	defer cancel()
	err := c.retry(rctx, "withdraw campaign", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		_, err := ep.elections.Resign(ctx, connect.NewRequest(req))
		return err
	})
	if err != nil {
		c.log.Info("fenced: could not withdraw an abandoned campaign; it ends with the session", "election", e.name, "session", s.id, "seq", seq, "err", err)
	}
}

// Resign ends the leadership: the Context is cancelled first, with
// ErrNotHeld as its cause, so that work under it stops before the next
// candidate leads; then the server makes the next candidate leader with a
// new token. Network failures are retried with the same sequence number
// until ctx ends. Resign returns nil when the server resigned the
// leadership or the Election did not lead, and the session's Err after the
// session was lost (its leadership ends on the server with it).
func (e *Election) Resign(ctx context.Context) error {
	e.mu.Lock()
	if e.cancel != nil {
		e.cancel(ErrNotHeld)
	}
	e.grant, e.ctx, e.cancel = fence.Grant{}, notHeld, nil
	e.mu.Unlock()
	if err := fence.ValidateName(e.name); err != nil {
		return fmt.Errorf("client: resign: %w", err)
	}
	s, c := e.s, e.s.c
	switch err := s.Err(); {
	case errors.Is(err, ErrSessionClosed):
		return nil
	case err != nil:
		return fmt.Errorf("client: resign %q: %w", e.name, err)
	}
	cctx, cancel := c.until(ctx, time.Time{}, nil)
	defer cancel()
	seq := s.nextSeq()
	err := c.retry(cctx, "resign", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		_, err := ep.elections.Resign(ctx, connect.NewRequest(&fencedv1.ResignRequest{Name: e.name, Session: s.id, Secret: s.secret, Seq: seq}))
		return err
	})
	if err != nil {
		return fmt.Errorf("client: resign %q: %w", e.name, err)
	}
	return nil
}

// Proclaim changes the leader's value; the term token stays. It fails
// with ErrElectionNotLeader when the Election does not lead, or no longer
// with its token (it lost and someone else leads), changing nothing.
// Network failures are retried with the same sequence number until ctx
// ends.
func (e *Election) Proclaim(ctx context.Context, value string) error {
	g := e.Grant()
	if g.Token == 0 || e.Context().Err() != nil {
		return fmt.Errorf("client: proclaim %q: %w", e.name, ErrElectionNotLeader)
	}
	s, c := e.s, e.s.c
	cctx, cancel := c.until(ctx, time.Time{}, nil)
	defer cancel()
	seq := s.nextSeq()
	err := c.retry(cctx, "proclaim", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		_, err := ep.elections.Proclaim(ctx, connect.NewRequest(&fencedv1.ProclaimRequest{
			Name: e.name, Session: s.id, Secret: s.secret, Seq: seq, Value: []byte(value), Token: uint64(g.Token),
		}))
		return err
	})
	switch {
	case errors.Is(err, fence.ErrNotGranted):
		return fmt.Errorf("client: proclaim %q: %w: %w", e.name, ErrElectionNotLeader, err)
	case err != nil:
		return fmt.Errorf("client: proclaim %q: %w", e.name, err)
	}
	e.mu.Lock()
	if e.grant.Token == g.Token {
		e.value = value
	}
	e.mu.Unlock()
	return nil
}

// Leader returns the election's current leader and value, read
// linearizably: it reflects every change acknowledged before the call. It
// fails with ErrElectionNoLeader when nobody leads.
func (e *Election) Leader(ctx context.Context) (ElectionState, error) {
	return e.s.c.ElectionLeader(ctx, e.name)
}

// Observe returns a channel of the election's states: the current one
// first, then one after every change of its leader or value, in order
// (see Client.ObserveElection).
func (e *Election) Observe(ctx context.Context) <-chan ElectionState {
	return e.s.c.ObserveElection(ctx, e.name)
}

// Token returns the term token of the leadership the last successful
// Campaign won, 0 before that and after Resign. It keeps returning the
// token after the leadership was lost: a resource that has seen the next
// leader's token rejects it.
func (e *Election) Token() fence.Token { return e.Grant().Token }

// Grant returns the leadership's grant (kind leader, scope the name), the
// zero Grant when not leading.
func (e *Election) Grant() fence.Grant {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.grant
}

// Value returns the value the Election leads with (its campaign's, or
// its last Proclaim's).
func (e *Election) Value() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.value
}

// Context returns a context for the work done as leader. It is cancelled
// when the leadership is lost or uncertain (the session was lost: its
// cause wraps fence.ErrLockLost), when the session is closed, and by
// Resign (cause ErrNotHeld). Before the first Campaign and after Resign it
// is already cancelled. Call it again after each Campaign.
func (e *Election) Context() context.Context {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ctx
}

// Done returns a channel closed when the leadership ends: Context().Done().
func (e *Election) Done() <-chan struct{} { return e.Context().Done() }

// ElectionLeader returns election name's current leader and value, read
// linearizably. It fails with ErrElectionNoLeader when nobody leads.
func (c *Client) ElectionLeader(ctx context.Context, name string) (ElectionState, error) {
	if err := fence.ValidateName(name); err != nil {
		return ElectionState{}, fmt.Errorf("client: election leader: %w", err)
	}
	if err := c.closed(); err != nil {
		return ElectionState{}, err
	}
	cctx, cancel := c.until(ctx, time.Time{}, nil)
	defer cancel()
	var resp *fencedv1.LeaderResponse
	err := c.retry(cctx, "election leader", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		r, err := ep.elections.Leader(ctx, connect.NewRequest(&fencedv1.LeaderRequest{Name: name}))
		if err == nil {
			resp = r.Msg
		}
		return err
	})
	if err != nil {
		return ElectionState{}, fmt.Errorf("client: election leader %q: %w", name, err)
	}
	st := ElectionState{Name: name, Value: string(resp.GetValue()), Revision: resp.GetRevision(), Candidates: int(resp.GetCandidates())}
	if !resp.GetHasLeader() {
		return st, fmt.Errorf("client: election %q: %w", name, ErrElectionNoLeader)
	}
	st.Leader = grantOf(resp.GetGrant(), 0, 0)
	return st, nil
}

// ObserveElection returns a channel of election name's states: the
// current one first, then one after every change of its leader or value,
// in order. The server pushes them; there is no polling. When the stream
// breaks (the endpoint went away, the cluster's leader changed), the SDK
// reconnects, on the next endpoint if need be, and resumes after the last
// revision received: the server's replicated history fills the gap, so no
// change is lost across a reconnect or a failover. If the gap is longer
// than the history the server keeps (64 changes per election), the next
// state is the current one with Skipped set.
//
// A receiver can check that it missed nothing: each state's PrevRevision
// is the Revision of the one before it, unless Skipped (or 0, after the
// election had neither leader nor candidate). The channel is unbuffered:
// a slow receiver slows the stream, never loses a state. It is closed when
// ctx ends, the Client is closed, or the server refuses the observation
// (an invalid name, no permission); the error is logged.
func (c *Client) ObserveElection(ctx context.Context, name string) <-chan ElectionState {
	return c.ObserveElectionAfter(ctx, name, 0)
}

// ObserveElectionAfter is ObserveElection resuming after revision after (a
// Revision received earlier): the first states are the changes after it,
// or, when some are no longer kept, the current state with Skipped set.
// With after 0 it is ObserveElection.
func (c *Client) ObserveElectionAfter(ctx context.Context, name string, after uint64) <-chan ElectionState {
	out := make(chan ElectionState)
	if !c.goRun(func() {
		defer close(out)
		cctx, cancel := c.until(ctx, time.Time{}, nil)
		defer cancel()
		if err := c.observe(cctx, name, after, out); err != nil && cctx.Err() == nil {
			c.log.Warn("fenced: election observation ended", "election", name, "err", err)
		}
	}) {
		close(out)
	}
	return out
}

// observe streams name's states to out until ctx ends or the server
// refuses the observation.
func (c *Client) observe(ctx context.Context, name string, after uint64, out chan<- ElectionState) error {
	if err := fence.ValidateName(name); err != nil {
		return err
	}
	const minBackoff, maxBackoff = 10 * time.Millisecond, time.Second
	backoff := minBackoff
	for n := 1; ctx.Err() == nil; n++ {
		i, ep := c.endpoint()
		stream, err := ep.elections.Observe(ctx, connect.NewRequest(&fencedv1.ObserveRequest{Name: name, AfterRevision: after}))
		if err == nil {
			for stream.Receive() {
				msg := stream.Msg()
				st := ElectionState{Name: name, Value: string(msg.GetValue()), Revision: msg.GetRevision(), PrevRevision: msg.GetPrevRevision(), Skipped: msg.GetSkipped()}
				if msg.GetHasLeader() {
					st.Leader = grantOf(msg.GetLeader(), 0, 0)
				}
				select {
				case out <- st:
				case <-ctx.Done():
					stream.Close()
					return ctx.Err()
				}
				after, backoff, n = st.Revision, minBackoff, 0
			}
			err = stream.Err()
			stream.Close()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			// A stream breaks in many ways (the member died, the leader
			// changed, a proxy cut it); only the server's refusal of the
			// observation itself is final.
			if err = wireconnect.Decode(err, wire.Call{}); observeRefused(err) {
				return err
			}
		}
		c.log.Debug("fenced: observation interrupted; resuming", "election", name, "endpoint", ep.addr, "after", after, "err", err)
		c.failover(i)
		if n%len(c.endpoints) != 0 && err != nil {
			continue
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		backoff = min(2*backoff, maxBackoff)
	}
	return ctx.Err()
}

// observeRefused reports an error that ends an observation for good: the
// server refused the request itself.
func observeRefused(err error) bool {
	return errors.Is(err, fence.ErrInvalidArgument) || errors.Is(err, fence.ErrPermissionDenied) || errors.Is(err, ErrClosed)
}
