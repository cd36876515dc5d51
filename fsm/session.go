package fsm

import (
	"fmt"
	"sort"

	fence "github.com/fenced-dev/fenced"
)

// maxRequestIDLen bounds request ids, which are kept in the state.
const maxRequestIDLen = 64

// session is a live session and the locks it holds or waits for.
type session struct {
	id        uint64
	ttlMs     int64
	requestID string
	held      map[string]struct{}
	waiting   map[string]struct{}
	replies   replies
}

func newSession(id uint64, ttlMs int64, requestID string) *session {
	return &session{
		id:        id,
		ttlMs:     ttlMs,
		requestID: requestID,
		held:      make(map[string]struct{}),
		waiting:   make(map[string]struct{}),
	}
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
	return fence.ValidateTTL(msDuration(ttlMs))
}

func (m *Machine) createSession(requestID string, ttlMs int64) Result {
	if m.issuer == "" {
		return Result{Err: fmt.Errorf("%w: the cluster is not initialised yet; retry", fence.ErrNotLeader)}
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
	s := newSession(m.lastSession, ttlMs, requestID)
	m.sessions[s.id] = s
	if requestID != "" {
		m.byRequest[requestID] = s.id
	}
	m.obs.SessionStarted(s.id, ttlMs)
	return Result{Session: s.id}
}

// endSession removes a session: its locks are released (waiters promoted,
// in name order so every replica issues the same tokens) and it leaves every
// queue it waits in.
func (m *Machine) endSession(id uint64, reason EndReason, now int64) Result {
	s := m.sessions[id]
	if s == nil {
		return Result{Session: id}
	}
	for _, name := range sortedKeys(s.waiting) {
		m.locks[name].removeWaiter(id)
		m.dropIfIdle(name)
		m.obs.WaitEnded(name, id)
	}
	for _, name := range sortedKeys(s.held) {
		m.releaseHeld(m.locks[name], reason, now)
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
	return SessionInfo{ID: s.id, TTLMs: s.ttlMs, Held: sortedKeys(s.held), Waiting: sortedKeys(s.waiting)}
}

func sortedKeys(set map[string]struct{}) []string {
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
