package server

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// Renewable grants (fsm/renew.go): Renew proposes RenewGrant, and every
// node restarts the session's deadline with its TTL when it applies it.
// While the proposal is on its way the leader proposes no expiry of the
// session (it is pinned), so a renewal the caller is told succeeded is
// never overtaken by an expiry proposed before it was applied.

// pinnedRecheck is how soon a pinned session that is past its deadline is
// looked at again.
const pinnedRecheck = time.Millisecond

var _ fsm.RenewObserver = (*events)(nil)

// SessionRenewed implements fsm.RenewObserver: the session's deadline
// restarts from now with its TTL, which may be shorter than before.
func (e *events) SessionRenewed(session uint64, ttlMs int64) {
	e.expiry.retime(session, time.Duration(ttlMs)*time.Millisecond)
	e.metrics.renewals.Inc()
}

// pin stops the expiry of session id from being proposed until unpin. It
// fails for a session that is unknown or whose expiry was already
// proposed: that renewal would come too late.
func (l *sessionExpiry) pin(id uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	ls, ok := l.table[id]
	if !ok || ls.expiring != 0 {
		return false
	}
	ls.pins++
	l.table[id] = ls
	return true
}

func (l *sessionExpiry) unpin(id uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ls, ok := l.table[id]; ok && ls.pins > 0 {
		ls.pins--
		l.table[id] = ls
	}
}

// retime sets session id's TTL and restarts its deadline from now, earlier
// or later than before.
func (l *sessionExpiry) retime(id uint64, ttl time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ls, ok := l.table[id]
	if !ok {
		return
	}
	d := l.now().add(ttl)
	earlier := d < ls.deadline
	ls.ttl, ls.deadline = toTTLMs(ttl), d
	if earlier {
		// The queued entry is after the new deadline: queue a new one and
		// let the old one drop when it comes up.
		ls.gen++
		heap.Push(&l.queue, deadlineEntry{id: id, at: d, gen: ls.gen})
	}
	l.table[id] = ls
}

func validateRenew(m *fencedv1.RenewRequest) error {
	errs := []error{fence.ValidateName(m.Name)}
	if m.Session == 0 {
		errs = append(errs, fmt.Errorf("%w: session is 0; give the session holding the grant", fence.ErrInvalidArgument))
	}
	if m.TtlMs != 0 {
		errs = append(errs, fence.ValidateTTLMillis(m.TtlMs))
	}
	return errors.Join(errs...)
}

// Renew implements LockServiceHandler: the grant of name held by session
// is renewed, with ttl_ms as the session's TTL from now on (0 keeps it).
// A session that does not hold the lock gets NOT_OWNED and nothing
// changes; a wrong secret is refused (not owner); a session that expired,
// or whose expiry is under way, is not found.
func (h *lockService) Renew(ctx context.Context, req *connect.Request[fencedv1.RenewRequest]) (*connect.Response[fencedv1.RenewResponse], error) {
	m := req.Msg
	if err := validateRenew(m); err != nil {
		return nil, toConnect(err)
	}
	hash, err := h.s.checkOwner(m.Session, m.Secret, false)
	if err != nil {
		return nil, toConnect(err)
	}
	if !h.s.expiry.pin(m.Session) {
		return nil, toConnect(fmt.Errorf("%w: session %d expired or is expiring; its grant cannot be renewed", fence.ErrSessionNotFound, m.Session))
	}
	defer h.s.expiry.unpin(m.Session)
	res, err := h.s.propose(ctx, &statev1.Command{Op: &statev1.Command_RenewGrant{RenewGrant: &statev1.RenewGrant{
		Session: m.Session, Name: m.Name, Token: m.Token, TtlMs: m.TtlMs, SecretHash: hash,
	}}})
	if err != nil {
		return nil, toConnect(err)
	}
	if !res.Granted {
		return connect.NewResponse(&fencedv1.RenewResponse{Result: fencedv1.RenewResult_RENEW_RESULT_NOT_OWNED}), nil
	}
	return connect.NewResponse(&fencedv1.RenewResponse{Result: fencedv1.RenewResult_RENEW_RESULT_RENEWED, Grant: grantProto(res.Grant)}), nil
}
