package fsm

import (
	"fmt"
	"sort"

	fence "github.com/fenced-dev/fenced"
)

// maxRequestIDLen bounds request ids, which are kept in the state.
const maxRequestIDLen = 64

// session is a live session: its TTL, what it holds and waits for in each
// primitive, and the results of its recent requests.
type session struct {
	id        uint64
	ttlMs     int64
	requestID string
	bound     [numKinds]binding
	replies   replies
}

// SessionInfo describes a live session.
type SessionInfo struct {
	// ID is the session id.
	ID uint64
	// TTLMs is the session's TTL in milliseconds.
	TTLMs int64
	// Held lists the locks the session holds, sorted.
	Held []string
	// Waiting lists the locks the session waits for, sorted.
	Waiting []string
}

func validateSession(requestID string, ttlMs int64) error {
	if len(requestID) > maxRequestIDLen {
		return fmt.Errorf("%w: request id is %d bytes, longer than %d", fence.ErrInvalidArgument, len(requestID), maxRequestIDLen)
	}
	return fence.ValidateTTLMillis(ttlMs)
}

// errNotInitialised refuses a command that needs the issuer before the
// cluster's first leader applied Init.
func errNotInitialised() error {
	return fmt.Errorf("%w: the cluster is not initialised yet; retry", fence.ErrNotLeader)
}

func (m *Machine) createSession(requestID string, ttlMs int64) Result {
	if m.issuer == "" {
		return Result{Err: errNotInitialised()}
	}
	if err := validateSession(requestID, ttlMs); err != nil {
		return Result{Err: err}
	}
	if requestID != "" {
		if id, ok := m.byRequest[requestID]; ok {
			return Result{Session: id}
		}
	}
	m.lastSession++
	s := &session{id: m.lastSession, ttlMs: ttlMs, requestID: requestID}
	m.addSession(s)
	m.obs.SessionStarted(s.id, ttlMs)
	return Result{Session: s.id}
}

func (m *Machine) addSession(s *session) {
	m.sessions[s.id] = s
	if s.requestID != "" {
		m.byRequest[s.requestID] = s.id
	}
}

// requestSession resolves the session of a request that may take a grant:
// session sid, or for sid 0 a per-grant session of ttlMs created in the
// same command (de-duplicated by requestID), whose request is seq 1.
// created reports a per-grant session this command made (not a retry's):
// a request that leaves it with nothing ends it (OneShotUnused).
func (m *Machine) requestSession(sid, seq uint64, requestID string, ttlMs int64) (s *session, _ uint64, created bool, err error) {
	if sid == 0 {
		if err := validateSession(requestID, ttlMs); err != nil {
			return nil, 0, false, err
		}
		res := m.createSession(requestID, ttlMs)
		if res.Err != nil {
			return nil, 0, false, res.Err
		}
		created = m.sessions[res.Session].replies.empty()
		sid, seq = res.Session, 1
	}
	s = m.sessions[sid]
	if s == nil {
		return nil, 0, false, fmt.Errorf("%w: session %d does not exist (expired, closed or never created); create a new session", fence.ErrSessionNotFound, sid)
	}
	return s, seq, created, nil
}

// endSession removes a session: every primitive releases what it holds
// (promoting waiters) and takes it out of every queue.
func (m *Machine) endSession(id uint64, reason EndReason, now int64) Result {
	s := m.sessions[id]
	if s == nil {
		return Result{Session: id}
	}
	for _, p := range m.primitives {
		p.endSession(s, reason, now)
	}
	delete(m.sessions, id)
	if s.requestID != "" {
		delete(m.byRequest, s.requestID)
	}
	m.obs.SessionEnded(id, reason)
	return Result{Session: id, Ended: true}
}

// Session returns a live session, or false.
func (m *Machine) Session(id uint64) (SessionInfo, bool) {
	s := m.sessions[id]
	if s == nil {
		return SessionInfo{}, false
	}
	return s.info(), true
}

// Sessions returns every live session, sorted by id.
func (m *Machine) Sessions() []SessionInfo {
	out := make([]SessionInfo, 0, len(m.sessions))
	for _, s := range m.sessions {
		out = append(out, s.info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// SessionCount returns the number of live sessions.
func (m *Machine) SessionCount() int { return len(m.sessions) }

func (s *session) info() SessionInfo {
	b := &s.bound[kindLock]
	return SessionInfo{ID: s.id, TTLMs: s.ttlMs, Held: sortedKeys(b.held), Waiting: sortedKeys(b.waiting)}
}
