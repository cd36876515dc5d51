package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// DefaultTTL is the TTL of a session created without WithTTL.
const DefaultTTL = 15 * time.Second

// State is how far the client trusts a session.
type State int

const (
	// StateValid means the session's validity has not run out and its
	// renewals are confirmed on schedule.
	StateValid State = iota + 1
	// StateJeopardy means a renewal that should have been confirmed by now
	// was not: the session is still valid until ValidUntil, but the holder
	// should expect to lose it and wind down or pause its work. A session
	// in jeopardy returns to StateValid when a renewal is confirmed.
	StateJeopardy
	// StateLost means the session can no longer be trusted: its validity
	// ran out, the server reported it gone, or it or its Client was
	// closed. Err says which. The state is final.
	StateLost
)

// String returns "valid", "jeopardy" or "lost".
func (st State) String() string {
	switch st {
	case StateValid:
		return "valid"
	case StateJeopardy:
		return "jeopardy"
	case StateLost:
		return "lost"
	}
	return fmt.Sprintf("State(%d)", int(st))
}

// Session is a server-side session kept alive by the Client. Locks taken
// with a session (see NewMutex) last as long as the session: one renewal
// keeps all of them.
//
// The client measures the session's validity itself, on the monotonic
// clock, from just before it sent the request that created or last renewed
// the session: ValidUntil = sent + TTL - margin. The server keeps the
// session for at least TTL after it received that request, so the client
// gives the session up first, by at least the margin, as long as its clock
// and the server's run at about the same rate. When ValidUntil passes
// without a confirmed renewal, or the server says the session is gone, the
// session is lost: Done closes and the Context of every grant is
// cancelled. An uncertain session counts as lost.
//
// This is a liveness signal, not a safety guarantee: a process that pauses
// may act after it lost the session without having noticed. The fencing
// token each grant carries, checked at the resource, is what keeps such a
// write out.
//
// A Session is safe for concurrent use.
type Session struct {
	c             *Client
	id            uint64
	secret        string // proves ownership of the session to the server
	ttl           time.Duration
	margin        time.Duration
	jeopardyAfter time.Duration // after confirmed, without a newer confirmation

	ctx    context.Context // cancelled with err when the session is lost
	cancel context.CancelCauseFunc
	seq    atomic.Uint64

	mu         sync.Mutex
	state      State
	err        error
	confirmed  time.Time // sending time of the newest confirmed create or renewal
	validUntil time.Time
	timer      Timer         // fires at the next jeopardy or validity deadline
	changed    chan struct{} // closed and replaced at every change of state
	jeopardy   chan struct{} // closed in jeopardy and when lost; replaced on recovery
	inJeopardy bool          // jeopardy is closed

	// Guarded by keeper.mu.
	kaNonce   uint64    // the renewal in flight, 0 if none
	kaRetryAt time.Time // no renewal before this, after one failed
	// kaStream is the stream the session was last renewed on: the server
	// pushes the session's revocation to it. A session is renewed at once
	// on any other stream.
	kaStream *kaStream
}

// A SessionOption configures a session created by NewSession.
type SessionOption func(*sessionOptions)

type sessionOptions struct {
	ttl       time.Duration
	margin    time.Duration
	marginSet bool
}

// WithTTL sets the session's TTL: how long the server keeps the session
// (and its locks) after the last renewal it received. It must be between
// fence.MinTTL and fence.MaxTTL; the default is DefaultTTL. The client
// renews every TTL/3.
func WithTTL(ttl time.Duration) SessionOption {
	return func(o *sessionOptions) { o.ttl = ttl }
}

// WithMargin sets how much earlier than the server the client gives up a
// session whose renewals fail: ValidUntil = sent + TTL - margin. It covers
// the difference between the client's and the server's clock rates and the
// time the client needs to stop its work. It must be at least 0 and less
// than TTL/2. The default is the larger of TTL/10 and 20ms.
func WithMargin(margin time.Duration) SessionOption {
	return func(o *sessionOptions) { o.margin, o.marginSet = margin, true }
}

// defaultMargin is max(ttl/10, 20ms), kept below ttl/2.
func defaultMargin(ttl time.Duration) time.Duration {
	return min(max(ttl/10, 20*time.Millisecond), ttl/2-time.Millisecond)
}

// jeopardyAfter is how long after the last confirmed renewal was sent a
// session enters jeopardy: two renewal intervals (2·TTL/3), that is one
// whole interval after the renewal that should have been confirmed was
// due; but never later than halfway between that renewal and the end of
// validity, so a large margin still leaves a warning.
func jeopardyAfter(ttl, margin time.Duration) time.Duration {
	j := 2 * ttl / 3
	if valid := ttl - margin; j >= valid {
		j = (ttl/3 + valid) / 2
	}
	return j
}

// NewSession creates a session on the server and keeps it alive until it
// is closed or lost. ctx bounds the creation only, not the session's life.
//
// Creation is retried, on the next endpoint if need be, until ctx ends;
// every retry carries the same request id, so the server creates one
// session however many attempts reach it. A session whose reply arrives
// after its validity (TTL - margin from the first attempt) ran out is
// closed and created again.
//
// NewSession fails with an error wrapping fence.ErrInvalidArgument for a
// TTL or margin out of range, before sending anything.
func (c *Client) NewSession(ctx context.Context, opts ...SessionOption) (*Session, error) {
	o := sessionOptions{ttl: DefaultTTL}
	for _, opt := range opts {
		opt(&o)
	}
	if err := fence.ValidateTTL(o.ttl); err != nil {
		return nil, fmt.Errorf("client: new session: %w", err)
	}
	margin := defaultMargin(o.ttl)
	if o.marginSet {
		margin = o.margin
	}
	if margin < 0 || margin >= o.ttl/2 {
		return nil, fmt.Errorf("client: new session: %w: margin %v must be at least 0 and less than half the ttl (%v)",
			fence.ErrInvalidArgument, margin, o.ttl/2)
	}
	if err := c.closed(); err != nil {
		return nil, err
	}
	for {
		reqID, secret := newRequestID(), newSecret()
		sent := c.clock.Now()
		vctx, cancel := c.until(ctx, sent.Add(o.ttl-margin), errTooLate)
		var resp *fencedv1.CreateSessionResponse
		err := c.retry(vctx, "create session", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
			r, err := ep.sessions.CreateSession(ctx, connect.NewRequest(&fencedv1.CreateSessionRequest{
				TtlMs:     o.ttl.Milliseconds(),
				RequestId: reqID,
				Secret:    secret,
			}))
			if err == nil {
				resp = r.Msg
			}
			return err
		})
		cancel()
		if err != nil {
			if errors.Is(err, errTooLate) && ctx.Err() == nil {
				// A session this attempt created, if any, expires on the
				// server by itself; we never learned its id.
				c.log.Info("fenced: creating a session took longer than its validity; trying again")
				continue
			}
			return nil, fmt.Errorf("client: new session: %w", err)
		}
		ttl := o.ttl
		if ms := resp.GetTtlMs(); ms != 0 {
			// Checked before the conversion: a TTL that overflows a
			// time.Duration must not become a validity of any length.
			if err := fence.ValidateTTLMillis(ms); err != nil {
				return nil, fmt.Errorf("client: new session %d: the server answered an invalid ttl: %w", resp.GetSession(), err)
			}
			ttl = time.Duration(ms) * time.Millisecond
		}
		s := &Session{
			c:             c,
			id:            resp.GetSession(),
			secret:        secret,
			ttl:           ttl,
			margin:        margin,
			jeopardyAfter: jeopardyAfter(ttl, margin),
			state:         StateValid,
			confirmed:     sent,
			validUntil:    sent.Add(ttl - margin),
			changed:       make(chan struct{}),
			jeopardy:      make(chan struct{}),
		}
		s.ctx, s.cancel = context.WithCancelCause(context.Background())
		if !c.clock.Now().Before(s.validUntil) {
			s.lose(fmt.Errorf("%w: session %d: %w", fence.ErrLockLost, s.id, errTooLate), true)
			if ctx.Err() != nil {
				return nil, fmt.Errorf("client: new session: %w", context.Cause(ctx))
			}
			continue
		}
		s.mu.Lock()
		s.armLocked()
		s.mu.Unlock()
		if err := c.keeper.add(s); err != nil {
			s.lose(fmt.Errorf("session %d: %w", s.id, err), true)
			return nil, fmt.Errorf("client: new session: %w", err)
		}
		c.log.Debug("fenced: session created", "session", s.id, "ttl", ttl, "margin", margin)
		return s, nil
	}
}

// errTooLate ends a request whose answer could no longer be trusted: the
// validity it would have had ran out while waiting for it.
var errTooLate = errors.New("client: the reply came after its validity ran out")

// newRequestID returns a random id for the server's de-duplication.
func newRequestID() string { return randomHex() }

// newSecret returns a new session secret: 128 bits from crypto/rand, as
// 32 hexadecimal digits. The SDK makes its own so that a retried creation
// (same request id) carries the same secret; the server keeps only its
// hash.
func newSecret() string { return randomHex() }

// randomHex returns 16 random bytes as hexadecimal.
func randomHex() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ID returns the session's id on the server.
func (s *Session) ID() uint64 { return s.id }

// Secret returns the session's secret: whoever presents it with the
// session's id may renew or close the session, release its locks and
// acquire on its behalf. The SDK sends it with every request of the
// session; treat it like a password (the CLI hands it only to the command
// it runs). The server never returns it again.
func (s *Session) Secret() string { return s.secret }

// TTL returns the session's TTL as the server applies it.
func (s *Session) TTL() time.Duration { return s.ttl }

// Margin returns how much earlier than the server the client gives up the
// session (see WithMargin).
func (s *Session) Margin() time.Duration { return s.margin }

// Done returns a channel that is closed when the session is lost or
// closed. It closes at ValidUntil at the latest, even when the network is
// stuck.
func (s *Session) Done() <-chan struct{} { return s.ctx.Done() }

// Context returns a context that is cancelled when the session is lost or
// closed, with Err as its cause.
func (s *Session) Context() context.Context { return s.ctx }

// Err returns nil while the session is valid or in jeopardy, and why it
// ended once Done is closed: an error wrapping fence.ErrLockLost together
// with ErrExpired (validity ran out) or fence.ErrSessionNotFound (the
// server reported it gone); ErrSessionClosed after Close; ErrClosed after
// the Client's Close.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// ValidUntil returns the monotonic time until which the client trusts the
// session without a further confirmed renewal. It only moves later, and
// stops moving once the session is lost.
func (s *Session) ValidUntil() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.validUntil
}

// State returns the session's current state.
func (s *Session) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// Jeopardy returns a channel that is closed when the session is in
// jeopardy, and also when it is lost. If the session recovers, later calls
// return a new, open channel for the next episode; so a holder can pause
// work on Jeopardy and resume when Watch reports StateValid again.
func (s *Session) Jeopardy() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.jeopardy
}

// Watch returns the session's state and a channel that is closed at its
// next change. Once the state is StateLost it never changes and the
// channel never closes.
//
//	for {
//		st, changed := s.Watch()
//		log.Println("session is", st)
//		if st == client.StateLost {
//			return
//		}
//		<-changed
//	}
func (s *Session) Watch() (State, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state, s.changed
}

// Close ends the session: locally first, so that Done closes and every
// grant's Context is cancelled before any lock is released, then on the
// server, which releases everything the session holds. It returns nil if
// the server closed the session or no longer had it. If the server cannot
// be reached before ctx ends, Close returns an error and the server
// releases the session's locks when its TTL runs out.
func (s *Session) Close(ctx context.Context) error {
	s.lose(fmt.Errorf("session %d: %w", s.id, ErrSessionClosed), false)
	if err := s.c.closed(); err != nil {
		return err
	}
	cctx, cancel := s.c.until(ctx, time.Time{}, nil)
	defer cancel()
	if err := s.c.closeRemote(cctx, s.id, s.secret); err != nil && !errors.Is(err, fence.ErrSessionNotFound) {
		return fmt.Errorf("client: close session %d: %w; the server releases its locks when its TTL runs out", s.id, err)
	}
	return nil
}

// closeRemote asks the server to close session id, whose secret is secret.
func (c *Client) closeRemote(ctx context.Context, id uint64, secret string) error {
	return c.retry(ctx, "close session", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		_, err := ep.sessions.CloseSession(ctx, connect.NewRequest(&fencedv1.CloseSessionRequest{Session: id, Secret: secret}))
		return err
	})
}

// nextSeq returns the sequence number of a new mutating request.
func (s *Session) nextSeq() uint64 { return s.seq.Add(1) }

// renewDue returns when the session's next renewal is due: TTL/3 after
// the last confirmed one was sent.
func (s *Session) renewDue() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.confirmed.Add(s.ttl / 3)
}

// valid reports whether the session is still trusted at the clock's now.
// It is checked when a reply arrives, not only by the timer, so a reply
// that comes after ValidUntil is never taken even if the timer is late.
func (s *Session) valid() bool {
	now := s.c.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state != StateLost && now.Before(s.validUntil)
}

// renewed records a confirmed renewal whose request was sent at sent and
// which the server granted for ttl.
func (s *Session) renewed(sent time.Time, ttl time.Duration) {
	if ttl <= 0 {
		ttl = s.ttl
	}
	now := s.c.clock.Now()
	s.mu.Lock()
	if s.state == StateLost {
		s.mu.Unlock()
		return
	}
	if !now.Before(s.validUntil) {
		// The validity ran out before this answer arrived and the timer
		// has not caught up yet. Fail closed.
		s.mu.Unlock()
		s.expire()
		return
	}
	if vu := sent.Add(ttl - s.margin); vu.After(s.validUntil) {
		s.validUntil = vu
	}
	if sent.After(s.confirmed) {
		s.confirmed = sent
	}
	recovered := s.state == StateJeopardy && now.Before(s.confirmed.Add(s.jeopardyAfter))
	if recovered {
		s.setStateLocked(StateValid)
	}
	s.armLocked()
	s.mu.Unlock()
	if recovered {
		s.c.log.Info("fenced: session recovered from jeopardy", "session", s.id)
		s.c.hooks.recovered(s.id)
	}
}

// armLocked sets the timer to the next deadline: jeopardy while valid,
// then the end of validity.
func (s *Session) armLocked() {
	if s.timer != nil {
		s.timer.Stop()
	}
	next := s.validUntil
	if j := s.confirmed.Add(s.jeopardyAfter); s.state == StateValid && j.Before(next) {
		next = j
	}
	s.timer = s.c.clock.afterFunc(next.Sub(s.c.clock.Now()), s.tick)
}

// tick applies the deadlines that have passed.
func (s *Session) tick() {
	now := s.c.clock.Now()
	s.mu.Lock()
	if s.state == StateLost {
		s.mu.Unlock()
		return
	}
	if !now.Before(s.validUntil) {
		s.mu.Unlock()
		s.expire()
		return
	}
	entered := s.state == StateValid && !now.Before(s.confirmed.Add(s.jeopardyAfter))
	if entered {
		s.setStateLocked(StateJeopardy)
	}
	validUntil := s.validUntil
	s.armLocked()
	s.mu.Unlock()
	if entered {
		s.c.log.Warn("fenced: session in jeopardy: renewals are not being confirmed",
			"session", s.id, "valid_for", validUntil.Sub(now))
		s.c.hooks.jeopardy(s.id, validUntil.Sub(now))
	}
}

// expire loses the session because its validity ran out.
func (s *Session) expire() {
	s.lose(fmt.Errorf("%w: session %d: %w", fence.ErrLockLost, s.id, ErrExpired), true)
}

// setStateLocked changes the state and wakes the watchers.
func (s *Session) setStateLocked(st State) {
	s.state = st
	close(s.changed)
	s.changed = make(chan struct{})
	switch {
	case st != StateValid && !s.inJeopardy:
		close(s.jeopardy)
		s.inJeopardy = true
	case st == StateValid && s.inJeopardy:
		s.jeopardy = make(chan struct{})
		s.inJeopardy = false
	}
}

// lose ends the session locally with err, once: Done closes and the grants'
// contexts are cancelled with err as their cause, and renewals stop. With
// closeRemote, the SDK also asks the server, in the background and for at
// most the request timeout, to close the session, so that its locks go to
// the next holders without waiting for the server-side TTL and a session
// the client gave up cannot be kept alive by a renewal still in flight.
// It reports whether this call lost the session (false: it was lost
// already).
func (s *Session) lose(err error, closeRemote bool) (lost bool) {
	s.mu.Lock()
	if s.state == StateLost {
		s.mu.Unlock()
		return false
	}
	s.err = err
	s.setStateLocked(StateLost)
	if s.timer != nil {
		s.timer.Stop()
	}
	s.mu.Unlock()
	s.cancel(err)
	s.c.keeper.remove(s)
	if !errors.Is(err, ErrSessionClosed) && !errors.Is(err, ErrClosed) {
		s.c.log.Warn("fenced: session lost", "session", s.id, "err", err)
		s.c.hooks.lost(s.id, err)
	}
	if closeRemote {
		s.c.goRun(func() {
			ctx, cancel := context.WithTimeout(context.Background(), s.c.requestTimeout)
			defer cancel()
			if err := s.c.closeRemote(ctx, s.id, s.secret); err != nil && !errors.Is(err, fence.ErrSessionNotFound) {
				s.c.log.Info("fenced: could not close a lost session; the server expires it", "session", s.id, "err", err)
			}
		})
	}
	return true
}
