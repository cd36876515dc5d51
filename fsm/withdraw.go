package fsm

import (
	"fmt"

	fence "github.com/fenced-dev/fenced"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// Releases and withdrawals, shared by the primitives whose grants hang off
// sessions: a primitive implements releaser, and Machine.release does the
// rest (validation, the owner check, de-duplication by seq, withdrawals).

// releaseRequest is what every primitive's release command carries
// (statev1.Release, statev1.RWRelease).
type releaseRequest interface {
	GetSession() uint64
	GetSeq() uint64
	GetName() string
	GetWithdrawSeq() uint64
	GetRequestId() string
	GetTtlMs() int64
	GetQuota() *statev1.Quota
	GetSecretHash() []byte
}

// releaser is the part of a primitive a release needs. s is nil for a
// session that does not exist.
type releaser interface {
	// releaseOwn releases session s's grant of name, or takes s out of
	// name's queue: Released when it held a grant, NotOwned when another
	// session holds one, AlreadyReleased otherwise. s exists (sid is
	// s.id): a release by a session that does not exist never gets here.
	releaseOwn(name string, s *session, sid uint64, now int64) ReleaseResult
	// undoGrant releases session sid's grant of name if its token is
	// still tok (a later grant is left alone); false when it did not.
	undoGrant(name string, sid uint64, tok fence.Token, now int64) bool
	// undoWait takes s out of name's queue if the acquire seq queued it.
	undoWait(name string, s *session, seq uint64, now int64)
	// heldByOther reports whether a session other than sid holds name.
	heldByOther(name string, sid uint64) bool
	// replyName is the name the primitive's requests on name are
	// remembered under in their session's replies: name itself for the
	// lock, apart from it for the others, so that a retried seq is never
	// answered with a result of another primitive's object of the same
	// name.
	replyName(name string) string
}

// release applies r, a release of primitive p: session r.session lets go
// of its grant of r.name (or its place in the queue), or, with a
// withdraw_seq, withdraws one acquire (withdraw). A retried (session, seq)
// is answered with its first result.
func (m *Machine) release(p releaser, r releaseRequest, now int64) Result {
	name, sid, seq := r.GetName(), r.GetSession(), r.GetSeq()
	if err := fence.ValidateName(name); err != nil {
		return Result{Err: err}
	}
	if err := validateSecretHash(r.GetSecretHash()); err != nil {
		return Result{Err: err}
	}
	if sid == 0 && r.GetRequestId() != "" {
		return m.withdrawPerGrant(p, r, now)
	}
	s := m.sessions[sid]
	if s != nil {
		// A release for a session that does not exist changes nothing.
		if err := m.checkOwner(s, r.GetSecretHash()); err != nil {
			return Result{Err: err}
		}
	}
	if s != nil && seq > 0 {
		rep, ok, err := s.replies.get(seq, p.replyName(name))
		if err != nil {
			return Result{Err: err}
		}
		if ok && !rep.kind.isRelease() {
			return Result{Err: fmt.Errorf("%w: request seq %d was already used for an acquire; every request needs its own seq", fence.ErrInvalidArgument, seq)}
		}
		if ok {
			return Result{Session: sid, Release: rep.kind.release()}
		}
	}
	if w := r.GetWithdrawSeq(); w != 0 {
		return m.withdraw(p, s, sid, seq, w, name, now)
	}
	if s == nil {
		// A session that does not exist (session 0 among them) holds
		// nothing and waits for nothing: its release changes nothing. It
		// must not reach releaseOwn, where session 0 could pass for the
		// holder of a free object (a lock in its delay has holder 0).
		out := AlreadyReleased
		if p.heldByOther(name, sid) {
			out = NotOwned
		}
		return Result{Session: sid, Release: out}
	}
	out := p.releaseOwn(name, s, sid, now)
	s.replies.put(reply{seq: seq, kind: releaseReply(out), name: p.replyName(name)})
	return Result{Session: sid, Release: out}
}

// withdraw applies a release that withdraws the acquire (session sid, seq
// w) of name, whose caller gave up on it, and records the release's own
// reply under seq. It undoes exactly what that acquire did, whichever of
// the two is applied first:
//
//   - applied and granted: its grant is released, if the session still
//     holds it with the same token (a later grant is left alone);
//   - applied and queued: its waiter leaves the queue, if it is still
//     there;
//   - not applied yet: nothing changes now, and when it arrives it is
//     refused (its reply is withdrawn).
//
// In every case the acquire's reply becomes withdrawn, so a copy of it is
// refused later; applying the same withdrawal again changes nothing. A
// session that no longer exists holds nothing and can acquire nothing.
func (m *Machine) withdraw(p releaser, s *session, sid, seq, w uint64, name string, now int64) Result {
	if w == seq {
		return Result{Err: fmt.Errorf("%w: withdraw seq %d is the release's own seq; it must name the acquire to withdraw", fence.ErrInvalidArgument, w)}
	}
	released := false
	if s != nil {
		if w <= s.replies.floor {
			return Result{Err: fmt.Errorf("%w: acquire seq %d is too old to withdraw (only the newest %d requests of a session are remembered)",
				fence.ErrInvalidArgument, w, replyWindow)}
		}
		rep, ok, err := s.replies.get(w, p.replyName(name))
		switch {
		case err != nil:
			return Result{Err: err}
		case ok && rep.kind.isRelease():
			return Result{Err: fmt.Errorf("%w: withdraw seq %d was used for a release, not an acquire", fence.ErrInvalidArgument, w)}
		case ok && rep.kind == replyGranted:
			released = p.undoGrant(name, sid, rep.token, now)
		case ok && rep.kind == replyQueued:
			p.undoWait(name, s, w, now)
		}
		s.replies.put(reply{seq: w, kind: replyWithdrawn, name: p.replyName(name)})
	}
	out := AlreadyReleased
	if released {
		out = Released
	} else if p.heldByOther(name, sid) {
		out = NotOwned
	}
	if s != nil {
		s.replies.put(reply{seq: seq, kind: releaseReply(out), name: p.replyName(name)})
	}
	return Result{Session: sid, Release: out}
}

// withdrawPerGrant withdraws the acquire that asked for a per-grant
// session (session 0) with r's request id: seq 1 of that session. When the
// acquire has not been applied yet, or its session already ended, a
// session of r's TTL is created for the request id, holding nothing, so
// that the acquire is refused if it arrives while that session lives; it
// expires as any other, and counts against the caller's session quota.
func (m *Machine) withdrawPerGrant(p releaser, r releaseRequest, now int64) Result {
	if r.GetWithdrawSeq() != 1 || r.GetSeq() != 0 {
		return Result{Err: fmt.Errorf("%w: a release by request id withdraws a per-grant acquire: it needs withdraw_seq 1 and seq 0, not %d and %d",
			fence.ErrInvalidArgument, r.GetWithdrawSeq(), r.GetSeq())}
	}
	res := m.createSession(r.GetRequestId(), r.GetTtlMs(), r.GetQuota(), r.GetSecretHash())
	if res.Err != nil {
		return res
	}
	return m.withdraw(p, m.sessions[res.Session], res.Session, 0, 1, r.GetName(), now)
}
