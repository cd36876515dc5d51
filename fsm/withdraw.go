package fsm

import (
	"fmt"

	fence "github.com/fenced-dev/fenced"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

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
func (t *lockTable) withdraw(s *session, sid, seq, w uint64, name string, now int64) Result {
	m := t.m
	if w == seq {
		return Result{Err: fmt.Errorf("%w: withdraw seq %d is the release's own seq; it must name the acquire to withdraw", fence.ErrInvalidArgument, w)}
	}
	l := t.byName[name]
	released := false
	if s != nil {
		if w <= s.replies.floor {
			return Result{Err: fmt.Errorf("%w: acquire seq %d is too old to withdraw (only the newest %d requests of a session are remembered)",
				fence.ErrInvalidArgument, w, replyWindow)}
		}
		rep, ok, err := s.replies.get(w, name)
		switch {
		case err != nil:
			return Result{Err: err}
		case ok && rep.kind.isRelease():
			return Result{Err: fmt.Errorf("%w: withdraw seq %d was used for a release, not an acquire", fence.ErrInvalidArgument, w)}
		case ok && rep.kind == replyGranted && l != nil && l.holder == sid && l.token == rep.token:
			t.releaseHeld(l, Unlocked, now)
			released = true
		case ok && rep.kind == replyQueued && l != nil && l.queue.queuedBy(sid, w):
			m.leaveQueue(kindLock, name, &l.queue, s)
			t.dropIfIdle(name)
		}
		s.replies.put(reply{seq: w, kind: replyWithdrawn, name: name})
	}
	out := AlreadyReleased
	if released {
		out = Released
	} else if cur := t.byName[name]; cur != nil && cur.holder != 0 && cur.holder != sid {
		out = NotOwned
	}
	if s != nil {
		s.replies.put(reply{seq: seq, kind: releaseReply(out), name: name})
	}
	return Result{Session: sid, Release: out}
}

// withdrawPerGrant withdraws the acquire that asked for a per-grant
// session (session 0) with r's request id: seq 1 of that session. When the
// acquire has not been applied yet, or its session already ended, a
// session of r's TTL is created for the request id, holding nothing, so
// that the acquire is refused if it arrives while that session lives; it
// expires as any other, and counts against the caller's session quota.
func (t *lockTable) withdrawPerGrant(r *statev1.Release, now int64) Result {
	m := t.m
	if r.GetWithdrawSeq() != 1 || r.GetSeq() != 0 {
		return Result{Err: fmt.Errorf("%w: a release by request id withdraws a per-grant acquire: it needs withdraw_seq 1 and seq 0, not %d and %d",
			fence.ErrInvalidArgument, r.GetWithdrawSeq(), r.GetSeq())}
	}
	res := m.createSession(r.GetRequestId(), r.GetTtlMs(), r.GetQuota(), r.GetSecretHash())
	if res.Err != nil {
		return res
	}
	return t.withdraw(m.sessions[res.Session], res.Session, 0, 1, r.GetName(), now)
}
