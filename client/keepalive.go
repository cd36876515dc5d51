package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	fence "github.com/fenced-dev/fenced"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// keeper renews every session of a Client over one KeepAlive stream.
//
// Each session is renewed ttl/3 after the request that last confirmed it
// was sent, and at once on a stream that has not renewed it yet (a new
// session, or a new stream after a failover): the server pushes the
// revocation of a session (fenced revoke) to the streams that renewed it,
// so the holder learns of it at once rather than at its next renewal. A renewal carries a nonce; the keeper remembers when it was
// queued (before it is sent) and the answer with the same nonce extends
// the session's validity from that time. A renewal that is not answered
// within answerTimeout, on a stream that has answered nothing else in that
// time either, means the stream is stuck (a partition does not break a TCP
// connection, it silences it): the keeper abandons the stream and its
// connection and opens a new one, on the next endpoint, and renews at once
// on it. A stream that is slow but answering (a busy server working
// through a backlog of renewals) is kept: a new stream would put every
// session's renewal at the back of a new backlog at once. It keeps doing so while the sessions are valid;
// whether they stay valid is decided by each session's own timer, never by
// this loop, so a keeper stuck on the network cannot keep a session alive
// past its validity.
type keeper struct {
	c    *Client
	wake chan struct{} // capacity 1: run has something to look at

	mu       sync.Mutex
	sessions map[uint64]*Session
	pending  map[uint64]pendingRenewal // by nonce
	nonce    uint64
	backoff  time.Duration // before reopening a stream that failed
	started  bool
	// slack is how early a renewal may be sent so that renewals falling
	// due close together go out together: the schedule is looked at no
	// more often than every slack (scheduleSlackLocked), however many
	// sessions there are. minTTL is the shortest TTL kept alive.
	slack  time.Duration
	minTTL time.Duration
	// wakeAt is when run looks at the schedule next (zero: not before it
	// is poked). A new session pokes run only if it is due before then,
	// so opening many sessions does not rescan the schedule for each.
	wakeAt time.Time
}

// pendingRenewal is a renewal sent and not yet answered.
type pendingRenewal struct {
	s    *Session
	sent time.Time // before the request was sent
	st   *kaStream
}

// overdueAt is when p makes its stream overdue, unless the stream answers
// something before (k.mu held): its answer timeout after it was sent or
// after the stream's last answer, whichever is later.
func (p pendingRenewal) overdueAt() time.Time {
	from := p.sent
	if p.st.answered.After(from) {
		from = p.st.answered
	}
	return from.Add(answerTimeout(p.s))
}

func newKeeper(c *Client) *keeper {
	return &keeper{
		c:        c,
		wake:     make(chan struct{}, 1),
		sessions: make(map[uint64]*Session),
		pending:  make(map[uint64]pendingRenewal),
	}
}

// poke makes run look at the sessions again.
func (k *keeper) poke() {
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

// add starts keeping s alive. It fails with ErrClosed once the Client is
// closed.
func (k *keeper) add(s *Session) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.c.closed(); err != nil {
		return err
	}
	if !k.started {
		if !k.c.goRun(k.run) {
			return ErrClosed
		}
		k.started = true
	}
	k.sessions[s.id] = s
	if sl := renewalSlack(s.ttl); k.slack == 0 || sl < k.slack {
		k.slack = sl
	}
	if k.minTTL == 0 || s.ttl < k.minTTL {
		k.minTTL = s.ttl
	}
	if k.wakeAt.IsZero() || s.renewDue().Before(k.wakeAt) {
		k.poke()
	}
	return nil
}

// remove stops keeping s alive.
func (k *keeper) remove(s *Session) {
	k.mu.Lock()
	if k.sessions[s.id] == s {
		delete(k.sessions, s.id)
	}
	empty := len(k.sessions) == 0
	k.mu.Unlock()
	// With sessions left, the schedule simply skips s from now on; with
	// none, run lets the stream go.
	if empty {
		k.poke()
	}
}

// all returns the sessions being kept alive.
func (k *keeper) all() []*Session {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]*Session, 0, len(k.sessions))
	for _, s := range k.sessions {
		out = append(out, s)
	}
	return out
}

// run is the keeper's loop. It never blocks on the network: sending and
// receiving happen in the stream's own goroutines.
func (k *keeper) run() {
	var (
		st       *kaStream
		reopenAt time.Time
		timer    Timer
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		if st != nil {
			st.fail(ErrClosed)
		}
	}()
	for {
		k.mu.Lock()
		now := k.c.clock.Now()
		if st != nil {
			err := st.failure()
			if err == nil && k.overdueLocked(st, now) {
				timeout := k.answerTimeoutLocked(st, now)
				err = fmt.Errorf("no answer to a renewal within %v", timeout)
				st.fail(err)
				abortConn(st.stream, err, time.Now().Add(-timeout))
			}
			if err != nil {
				k.dropLocked(st)
				k.c.log.Info("fenced: keep-alive stream failed", "endpoint", st.addr, "err", err)
				k.c.failover(st.ep)
				reopenAt = now.Add(k.backoff)
				k.backoff = min(max(2*k.backoff, 10*time.Millisecond), k.maxBackoffLocked())
				st = nil
			}
		}
		if st != nil && len(k.sessions) == 0 {
			// Nothing left to keep alive: let the connection go.
			st.fail(errIdle)
			k.dropLocked(st)
			st = nil
		}
		if st == nil && len(k.sessions) > 0 && !now.Before(reopenAt) && k.c.ctx.Err() == nil {
			st = k.openLocked()
		}
		var next time.Time
		switch {
		case st != nil:
			next = k.scheduleLocked(st, now)
		case len(k.sessions) > 0:
			next = reopenAt
		}
		k.wakeAt = next
		k.mu.Unlock()

		if timer != nil {
			timer.Stop()
			timer = nil
		}
		if !next.IsZero() {
			timer = k.c.clock.afterFunc(next.Sub(now), k.poke)
		}
		var failed <-chan struct{}
		if st != nil {
			failed = st.done
		}
		select {
		case <-k.wake:
		case <-failed:
		case <-k.c.ctx.Done():
			return
		}
	}
}

var errIdle = errors.New("no sessions to keep alive")

// maxRenewalsPerMessage bounds the renewals sent in one message, keeping it
// far below the server's message size limit (each is under 70 bytes).
const maxRenewalsPerMessage = 1000

// scheduleLocked queues the renewals that are due on st and returns when
// the loop must look again: the next renewal due or the next answer
// overdue.
func (k *keeper) scheduleLocked(st *kaStream, now time.Time) time.Time {
	var next time.Time
	slack := k.scheduleSlackLocked()
	earliest := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for _, s := range k.sessions {
		if s.kaNonce != 0 {
			earliest(k.pending[s.kaNonce].overdueAt())
			continue
		}
		due := s.renewDue()
		if s.kaStream != st {
			// Not renewed on this stream yet: renew now, which also tells
			// the server to push the session's revocation to this stream.
			due = now
		}
		if s.kaRetryAt.After(due) {
			due = s.kaRetryAt
		}
		if now.Add(slack).Before(due) {
			earliest(due)
			continue
		}
		k.nonce++
		s.kaNonce = k.nonce
		k.pending[k.nonce] = pendingRenewal{s: s, sent: now, st: st}
		s.kaStream = st
		st.queue = append(st.queue, &fencedv1.KeepAliveRequest{Session: s.id, Nonce: k.nonce, Secret: s.secret})
		earliest(now.Add(answerTimeout(s)))
	}
	if len(st.queue) > 0 {
		select {
		case st.signal <- struct{}{}:
		default:
		}
	}
	return next
}

// overdueLocked reports whether a renewal sent on st has waited for its
// answer longer than its session's answer timeout while st answered
// nothing at all for as long, or while st answered a renewal sent after
// it.
func (k *keeper) overdueLocked(st *kaStream, now time.Time) bool {
	return k.answerTimeoutLocked(st, now) > 0
}

// answerTimeoutLocked returns the answer timeout of an overdue renewal on
// st (see overdueLocked), or 0 when none is.
func (k *keeper) answerTimeoutLocked(st *kaStream, now time.Time) time.Duration {
	for nonce, p := range k.pending {
		if p.st != st {
			continue
		}
		d := answerTimeout(p.s)
		// The server answers a stream's renewals in the order they were
		// sent: one sent later answered means this one was lost.
		lost := st.answeredNonce > nonce && !now.Before(p.sent.Add(d))
		if lost || !now.Before(p.overdueAt()) {
			return d
		}
	}
	return 0
}

// dropLocked forgets the renewals in flight on st; their sessions are
// renewed again on the next stream.
func (k *keeper) dropLocked(st *kaStream) {
	for nonce, p := range k.pending {
		if p.st == st {
			delete(k.pending, nonce)
			if p.s.kaNonce == nonce {
				p.s.kaNonce = 0
			}
		}
	}
}

// maxBackoffLocked bounds the pause before reopening a failed stream so
// that every session gets several attempts within its validity.
func (k *keeper) maxBackoffLocked() time.Duration {
	b := time.Second
	for _, s := range k.sessions {
		b = min(b, s.ttl/10)
	}
	return max(b, 10*time.Millisecond)
}

// renewalSlack is how early a renewal of a session with this TTL may be
// sent: a thirtieth of the TTL (a tenth of the renewal interval), between
// 1ms and 50ms.
func renewalSlack(ttl time.Duration) time.Duration {
	return min(max(ttl/30, time.Millisecond), 50*time.Millisecond)
}

// scanSpacing is the time between two looks at the schedule for each
// session kept alive: a look visits every session, and this keeps the
// looks under a few percent of a core however many there are (100,000
// sessions: every 200ms; a million: every 2s).
const scanSpacing = 2 * time.Microsecond

// scheduleSlackLocked is the slack of the sessions kept alive: that of
// their shortest TTL (renewalSlack), raised to scanSpacing per session,
// but never above a thirtieth of the shortest TTL.
func (k *keeper) scheduleSlackLocked() time.Duration {
	return scheduleSlack(k.slack, k.minTTL, len(k.sessions))
}

// scheduleSlack is the slack for that many sessions whose shortest TTL
// is minTTL, with that TTL's own slack base.
func scheduleSlack(base, minTTL time.Duration, sessions int) time.Duration {
	return max(base, min(time.Duration(sessions)*scanSpacing, minTTL/30))
}

// answerTimeout is how long a renewal of s may go unanswered before the
// keeper gives up on the stream it was sent on: a sixth of the TTL (half a
// renewal interval), at least 100ms (or ttl/3 for tiny TTLs) and at most
// the request timeout.
func answerTimeout(s *Session) time.Duration {
	d := max(s.ttl/6, min(s.ttl/3, 100*time.Millisecond))
	return min(d, s.c.requestTimeout)
}

// retryDelay is how long the keeper waits before renewing s again after
// the server answered a renewal with an error.
func retryDelay(s *Session) time.Duration {
	return min(max(s.ttl/10, 10*time.Millisecond), time.Second)
}

// answer handles the server's answers to renewals, those of one message
// together.
func (k *keeper) answer(st *kaStream, resps []*fencedv1.KeepAliveResponse) {
	now := k.c.clock.Now()
	type outcome struct {
		p    pendingRenewal
		resp *fencedv1.KeepAliveResponse
	}
	outcomes := make([]outcome, 0, len(resps))
	var revoked []*Session
	k.mu.Lock()
	st.answered = now
	for _, resp := range resps {
		if resp.GetNonce() == 0 && resp.GetRevoked() {
			// Pushed by the server: an administrator revoked the session.
			if s := k.sessions[resp.GetSession()]; s != nil {
				revoked = append(revoked, s)
			}
			continue
		}
		p, ok := k.pending[resp.GetNonce()]
		if !ok || p.st != st || p.s.id != resp.GetSession() {
			continue
		}
		delete(k.pending, resp.GetNonce())
		st.answeredNonce = max(st.answeredNonce, resp.GetNonce())
		if p.s.kaNonce == resp.GetNonce() {
			p.s.kaNonce = 0
		}
		if resp.GetError() != "" && !resp.GetGone() && !resp.GetNotOwner() {
			p.s.kaRetryAt = now.Add(retryDelay(p.s))
		} else {
			k.backoff = 0
		}
		outcomes = append(outcomes, outcome{p, resp})
	}
	k.mu.Unlock()

	for _, s := range revoked {
		s.lose(fmt.Errorf("%w: session %d: %w", fence.ErrLockLost, s.id, ErrRevoked), false)
	}
	reschedule := len(revoked) > 0
	for _, o := range outcomes {
		s, resp := o.p.s, o.resp
		reschedule = reschedule || resp.GetGone() || resp.GetError() != ""
		switch {
		case resp.GetGone() && resp.GetRevoked():
			s.lose(fmt.Errorf("%w: session %d: %w", fence.ErrLockLost, s.id, ErrRevoked), false)
		case resp.GetNotOwner():
			// The server does not take this session's secret (a session
			// from before secrets): it cannot be kept alive, nor closed.
			s.lose(fmt.Errorf("%w: session %d: %w: the server does not take its secret", fence.ErrLockLost, s.id, fence.ErrNotOwner), false)
		case resp.GetGone():
			s.lose(fmt.Errorf("%w: session %d: %w: the server reports it expired or closed", fence.ErrLockLost, s.id, fence.ErrSessionNotFound), false)
		case resp.GetError() != "":
			// The server answers a renewal it cannot make (it is not the
			// leader, say) by ending the stream; an error in an answer
			// means the same from a server that answers instead.
			k.c.log.Info("fenced: renewal failed", "session", s.id, "endpoint", st.addr, "err", resp.GetError())
			st.fail(fmt.Errorf("renewal: %s", resp.GetError()))
		case fence.ValidateTTLMillis(resp.GetTtlMs()) != nil:
			// Never turn a TTL that overflows a time.Duration into a
			// validity: count the answer as a failed renewal.
			err := fence.ValidateTTLMillis(resp.GetTtlMs())
			k.c.log.Warn("fenced: renewal answered an invalid ttl", "session", s.id, "endpoint", st.addr, "err", err)
			st.fail(fmt.Errorf("renewal: the server answered an invalid ttl: %w", err))
		default:
			s.renewed(o.p.sent, time.Duration(resp.GetTtlMs())*time.Millisecond)
		}
	}
	// A confirmed renewal needs no new look at the schedule: run wakes at
	// the renewal's answer deadline anyway, which comes before the
	// session's next renewal is due. Failures are retried sooner.
	if reschedule {
		k.poke()
	}
}

// kaStream is one KeepAlive stream: a goroutine that sends the queued
// renewals, one that receives the answers, and, when the Client built its
// own transport, a connection of its own, closed when the stream ends so a
// silent (partitioned) connection is never reused.
type kaStream struct {
	k      *keeper
	ep     int64
	addr   string
	cancel context.CancelFunc
	stream clientStream[fencedv1.KeepAliveRequest, fencedv1.KeepAliveResponse]
	signal chan struct{} // capacity 1: the queue has requests
	queue  []*fencedv1.KeepAliveRequest
	// answered is when the last message from the server arrived, and
	// answeredNonce the highest nonce of a renewal answered (k.mu).
	answered      time.Time
	answeredNonce uint64
	done          chan struct{} // closed by fail
	once          sync.Once
	err           error // why the stream ended; set before done is closed
}

// openLocked opens a stream to the current endpoint. It does not block:
// the request goes out with the first renewal.
func (k *keeper) openLocked() *kaStream {
	i, ep := k.c.endpoint()
	ctx, cancel := context.WithCancel(k.c.ctx)
	// The stream is opened by its first use, in its own goroutines, not
	// here under k.mu: a native one may dial the endpoint first. A
	// native stream shares the endpoint's native connection with the
	// pipeline; a Connect one gets a connection of its own.
	var tr *http.Transport
	stream := &lazyStream[fencedv1.KeepAliveRequest, fencedv1.KeepAliveResponse]{open: func() clientStream[fencedv1.KeepAliveRequest, fencedv1.KeepAliveResponse] {
		if s, native := k.c.openKeepAlive(ep); native {
			return s
		}
		hc := k.c.httpClient
		if k.c.ownTransport != nil {
			tr = newTransport(k.c.tls)
			hc = k.c.wrapped(&http.Client{Transport: tr})
		}
		return fencedv1connect.NewSessionServiceClient(hc, ep.url).KeepAlive(ctx)
	}}
	st := &kaStream{
		k:      k,
		ep:     i,
		addr:   ep.addr,
		cancel: cancel,
		stream: stream,
		signal: make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
	var wg sync.WaitGroup
	wg.Add(2)
	ok := k.c.goRun(func() { defer wg.Done(); st.sendLoop() })
	ok = ok && k.c.goRun(func() { defer wg.Done(); st.recvLoop() })
	if !ok {
		st.fail(ErrClosed)
		return st
	}
	// Once the stream fails or the Client closes, end a Receive in
	// progress and cancel the stream on the server (a native stream is
	// not tied to ctx).
	k.c.goRun(func() {
		<-ctx.Done()
		_ = stream.CloseResponse()
	})
	k.c.goRun(func() {
		wg.Wait()
		// Both loops ended, so open, which they ran, has returned.
		if tr != nil {
			tr.CloseIdleConnections()
		}
	})
	return st
}

// fail ends the stream with err, once.
func (st *kaStream) fail(err error) {
	st.once.Do(func() {
		st.err = err
		close(st.done)
		st.cancel()
	})
}

// failure returns why the stream ended, or nil while it runs.
func (st *kaStream) failure() error {
	select {
	case <-st.done:
		return st.err
	default:
		return nil
	}
}

func (st *kaStream) sendLoop() {
	defer st.stream.CloseRequest()
	for {
		select {
		case <-st.signal:
		case <-st.done:
			return
		}
		st.k.mu.Lock()
		q := st.queue
		st.queue = nil
		st.k.mu.Unlock()
		// Many renewals go in one message: the first carries the others
		// in its "more".
		for len(q) > 0 {
			n := min(len(q), maxRenewalsPerMessage)
			req := q[0]
			req.More = q[1:n]
			q = q[n:]
			if err := st.stream.Send(req); err != nil {
				st.fail(fmt.Errorf("send: %w", err))
				return
			}
		}
	}
}

func (st *kaStream) recvLoop() {
	defer st.stream.CloseResponse()
	for {
		resp, err := st.stream.Receive()
		if err != nil {
			st.fail(fmt.Errorf("receive: %w", err))
			return
		}
		more := resp.More
		resp.More = nil
		st.k.answer(st, append([]*fencedv1.KeepAliveResponse{resp}, more...))
	}
}
