package fsm

import (
	"errors"
	"fmt"

	fence "github.com/fenced-dev/fenced"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// Renewable grants: a grant with a TTL of its own (a per-grant session,
// client.Lease) is renewed through the log, since a renewal may change the
// TTL, which every replica keeps. RenewGrant checks that the session
// presenting its secret holds the lock (under the token, when one is
// given), sets the session's TTL and tells the node-local RenewObserver, so
// the leader restarts the session's deadline. The grant keeps its token: a
// renewal never grants anything. A session that does not hold the lock
// gets a result that is not Granted (the API's not_owned), and nothing
// changes.

// RenewObserver is an optional interface of an Observer that tracks
// session deadlines: its method is called, like the Observer's, inside
// Apply.
type RenewObserver interface {
	// SessionRenewed is called when a RenewGrant renewed session's grant;
	// ttlMs is the session's TTL from now on.
	SessionRenewed(session uint64, ttlMs int64)
}

func (t *lockTable) renew(r *statev1.RenewGrant) Result {
	m, name, sid := t.m, r.GetName(), r.GetSession()
	var ttlErr error
	if r.GetTtlMs() != 0 {
		ttlErr = fence.ValidateTTLMillis(r.GetTtlMs())
	}
	if err := errors.Join(fence.ValidateName(name), ttlErr, validateSecretHash(r.GetSecretHash())); err != nil {
		return Result{Err: err}
	}
	if sid == 0 {
		return Result{Err: fmt.Errorf("%w: renew needs the session holding the grant", fence.ErrInvalidArgument)}
	}
	s := m.sessions[sid]
	if s == nil {
		return Result{Err: errSessionNotFound(sid)}
	}
	if err := s.checkOwner(r.GetSecretHash()); err != nil {
		return Result{Err: err}
	}
	l := t.byName[name]
	if l == nil || l.holder != sid || (r.GetToken() != 0 && uint64(l.token) != r.GetToken()) {
		res := Result{Session: sid}
		if l != nil {
			res.Holder = l.holder
		}
		return res
	}
	if r.GetTtlMs() != 0 {
		s.ttlMs = int32(r.GetTtlMs()) // checked above: at most fence.MaxTTL
	}
	if o, ok := m.obs.(RenewObserver); ok {
		o.SessionRenewed(sid, s.ttl())
	}
	return Result{Session: sid, Granted: true, Grant: t.grantOf(l)}
}
