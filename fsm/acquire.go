package fsm

import (
	"fmt"

	fence "github.com/fenced-dev/fenced"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// acquireRequest is what every primitive's acquire command carries
// (statev1.Acquire, statev1.RWAcquire).
type acquireRequest interface {
	GetSession() uint64
	GetSeq() uint64
	GetName() string
	GetRequestId() string
	GetTtlMs() int64
	GetQuota() *statev1.Quota
	GetSecretHash() []byte
}

// startAcquire is the start every acquire shares: the name is checked, the
// cluster must be initialised with a token left, the request's session is
// resolved (created for session 0, see requestSession) and owner-checked,
// and a retried seq is looked up in the session's replies. It returns the
// session, the request's seq and whether this command created the
// session, and, for a retry of an acquire that was granted, its reply
// (the caller answers with that grant and changes nothing). replyName is
// the name the primitive remembers its requests under (releaser). A
// refused request changed nothing.
func (m *Machine) startAcquire(a acquireRequest, replyName string) (s *session, seq uint64, created bool, granted *reply, err error) {
	if err := fence.ValidateName(a.GetName()); err != nil {
		return nil, 0, false, nil, err
	}
	if m.issuer == "" {
		return nil, 0, false, nil, errNotInitialised()
	}
	if m.tokens.exhausted() {
		return nil, 0, false, nil, m.tokens.overflow()
	}
	s, seq, created, err = m.requestSession(a.GetSession(), a.GetSeq(), a.GetRequestId(), a.GetTtlMs(), a.GetQuota(), a.GetSecretHash())
	if err != nil || seq == 0 {
		return s, seq, created, nil, err
	}
	rep, ok, err := s.replies.get(seq, replyName)
	switch {
	case err != nil:
		return nil, 0, false, nil, err
	case ok && rep.kind.isRelease():
		return nil, 0, false, nil, fmt.Errorf("%w: request seq %d was already used for a release; every request needs its own seq", fence.ErrInvalidArgument, seq)
	case ok && rep.kind == replyWithdrawn:
		return nil, 0, false, nil, fmt.Errorf("%w: request seq %d was withdrawn by a release; every request needs its own seq", fence.ErrInvalidArgument, seq)
	case ok && rep.kind == replyGranted:
		granted := rep // copied here, so that only a retry moves it to the heap
		return s, seq, created, &granted, nil
	}
	return s, seq, created, nil, nil
}
