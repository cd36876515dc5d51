package fsm

import statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"

// Expiry. The Machine reads no clock: the leader's lease loop decides that
// a session's TTL ran out and proposes ExpireSession stamped with its term.
// NewLeader records each leadership as it takes over, and an expiry
// proposed in a term older than the newest leadership applied is ignored,
// so a deposed leader can never revoke live sessions. An expired session
// ends like a closed one: every primitive releases its grants.

func (m *Machine) newLeader(term uint64) Result {
	if term > m.leaderTerm {
		m.leaderTerm = term
	}
	return Result{}
}

func (m *Machine) expireSession(e *statev1.ExpireSession, now int64) Result {
	if e.GetTerm() < m.leaderTerm {
		return Result{Ignored: true}
	}
	return m.endSession(e.GetSession(), Expired, now)
}
