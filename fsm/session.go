package fsm

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sort"

	fence "github.com/fenced-dev/fenced"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// maxRequestIDLen bounds request ids, which are kept in the state.
const maxRequestIDLen = 64

// session is a live session: its TTL, what it holds and waits for in each
// primitive, and the results of its recent requests. A million of them
// live in a large deployment's state, so it is laid out to need no
// allocation of its own beyond itself for the common case of a session
// holding one lock (docs/benchmarks.md, "The cost of scale"): the secret's
// hash inline, the lock binding inline with a set of one name inline, the
// other primitives' bindings made on first use.
type session struct {
	id uint64
	// ttlMs is the TTL in milliseconds, at most fence.MaxTTL (24 h) so it
	// fits an int32: creation, renewal and restore all check it first.
	ttlMs int32
	// hasSecret reports secretHash holds the SHA-256 of the session's
	// secret (secret.go); false for a session from before secrets.
	hasSecret bool
	requestID string
	// use is the session's owner (the identity charged for it) and what
	// that owner's sessions use (quota.go); nil without an owner. The
	// owner is kept there only, once for all of its sessions.
	use        *usage
	secretHash [SecretHashLen]byte
	lock       binding                // kindLock's binding (bound, bind)
	others     *[numKinds - 1]binding // the other kinds' bindings; nil until one is used
	replies    replies
}

// owner returns the identity charged for the session, "" for none.
func (s *session) owner() string {
	if s.use == nil {
		return ""
	}
	return s.use.owner
}

// ttl returns the session's TTL in milliseconds.
func (s *session) ttl() int64 { return int64(s.ttlMs) }

// secret returns the hash of the session's secret, nil for a session
// without one. The slice is the session's own.
func (s *session) secret() []byte {
	if !s.hasSecret {
		return nil
	}
	return s.secretHash[:]
}

// setSecret keeps hash (SecretHashLen bytes or none) as the session's.
func (s *session) setSecret(hash []byte) {
	s.hasSecret = len(hash) > 0
	copy(s.secretHash[:], hash)
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
	// Others lists what the session holds and waits for in the other
	// primitives (semaphores, elections, read/write locks, queue claims),
	// by primitive, then held before waited for, then name.
	Others []Binding
	// Owner is the identity the session is charged to; "" when none.
	Owner string
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

// createSession creates a session charged to q's owner (within its
// quota) whose secret hashes to secretHash, or, for a retry of requestID,
// returns the session it created, provided the retry carries the same
// hash: a request id is no proof of ownership.
func (m *Machine) createSession(requestID string, ttlMs int64, q *statev1.Quota, secretHash []byte) Result {
	if m.issuer == "" {
		return Result{Err: errNotInitialised()}
	}
	if err := errors.Join(validateSession(requestID, ttlMs), validateSecretHash(secretHash)); err != nil {
		return Result{Err: err}
	}
	if requestID != "" {
		if id, ok := m.byRequest[requestID]; ok {
			if err := m.sessions[id].checkOwner(secretHash); err != nil {
				return Result{Err: fmt.Errorf("request id %q already created session %d, with another secret; a retry must carry the secret of its first attempt: %w", requestID, id, err)}
			}
			return Result{Session: id}
		}
	}
	if err := m.checkSessionQuota(q); err != nil {
		return Result{Err: err}
	}
	m.lastSession++
	s := &session{id: m.lastSession, ttlMs: int32(ttlMs), requestID: requestID}
	s.setSecret(secretHash)
	m.addSession(s, q.GetOwner())
	m.obs.SessionStarted(s.id, ttlMs)
	return Result{Session: s.id}
}

// addSession adds s, charged to owner ("" for none).
func (m *Machine) addSession(s *session, owner string) {
	if u := m.usageOf(owner); u != nil {
		u.sessions++
		s.use = u
	}
	m.sessions[s.id] = s
	if s.requestID != "" {
		m.byRequest[s.requestID] = s.id
	}
}

// requestSession resolves the session of a request that may take a grant:
// session sid, whose secret must hash to secretHash, or for sid 0 a
// per-grant session of ttlMs and that secret, charged to q's owner,
// created in the same command (de-duplicated by requestID), whose request
// is seq 1. created reports a per-grant session this command made (not a
// retry's): a request that leaves it with nothing ends it (OneShotUnused).
func (m *Machine) requestSession(sid, seq uint64, requestID string, ttlMs int64, q *statev1.Quota, secretHash []byte) (s *session, _ uint64, created bool, err error) {
	if err := validateSecretHash(secretHash); err != nil {
		return nil, 0, false, err
	}
	if sid == 0 {
		if err := validateSession(requestID, ttlMs); err != nil {
			return nil, 0, false, err
		}
		res := m.createSession(requestID, ttlMs, q, secretHash)
		if res.Err != nil {
			return nil, 0, false, res.Err
		}
		created = m.sessions[res.Session].replies.empty()
		sid, seq = res.Session, 1
	}
	s = m.sessions[sid]
	if s == nil {
		return nil, 0, false, errSessionNotFound(sid)
	}
	if err := m.checkOwner(s, secretHash); err != nil {
		return nil, 0, false, err
	}
	return s, seq, created, nil
}

// closeSession ends session id for its owner, who proves it with the hash
// of its secret. Closing a session that does not exist changes nothing.
func (m *Machine) closeSession(c *statev1.CloseSession, now int64) Result {
	if err := validateSecretHash(c.GetSecretHash()); err != nil {
		return Result{Err: err}
	}
	if s := m.sessions[c.GetSession()]; s != nil {
		if err := m.checkOwner(s, c.GetSecretHash()); err != nil {
			return Result{Err: err}
		}
	}
	return m.endSession(c.GetSession(), Closed, now)
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
	if u := s.use; u != nil {
		if u.sessions--; u.sessions == 0 {
			delete(m.owners, u.owner)
		}
	}
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

// SessionTTL is a live session's id and TTL.
type SessionTTL struct {
	ID    uint64
	TTLMs int64
}

// SessionTTLs returns every live session's id and TTL, by id: what the
// leader's expiry table is rebuilt from after a restore, without the
// copies of every session's bindings that Sessions makes.
func (m *Machine) SessionTTLs() []SessionTTL {
	out := make([]SessionTTL, 0, len(m.sessions))
	for _, s := range m.sessions {
		out = append(out, SessionTTL{ID: s.id, TTLMs: s.ttl()})
	}
	slices.SortFunc(out, func(a, b SessionTTL) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// SessionCount returns the number of live sessions.
func (m *Machine) SessionCount() int { return len(m.sessions) }

// Binding is one object of a primitive other than the lock that a
// session holds or waits for.
type Binding struct {
	// Primitive is semaphore, election, rwlock or queue.
	Primitive string
	// Name is the object's name; for a queue claim, the claim's scope
	// (ClaimScope), for a queue waited on, the queue's name.
	Name string
	// Waiting is true for an object waited for, false for one held.
	Waiting bool
}

// Shown lists what the session holds and what it waits for as people
// read it: lock names as they are, the other primitives' objects as
// "PRIMITIVE:NAME" (semaphore:pool).
func (si SessionInfo) Shown() (held, waiting []string) {
	held, waiting = append(held, si.Held...), append(waiting, si.Waiting...)
	for _, b := range si.Others {
		if b.Waiting {
			waiting = append(waiting, b.Primitive+":"+b.Name)
		} else {
			held = append(held, b.Primitive+":"+b.Name)
		}
	}
	return held, waiting
}

// primitiveNames name the kinds as SessionInfo.Others shows them.
var primitiveNames = [numKinds]string{kindLock: "lock", kindSemaphore: "semaphore", kindElection: "election", kindRWLock: "rwlock", kindQueue: "queue"}

func (s *session) info() SessionInfo {
	b := s.bound(kindLock)
	si := SessionInfo{ID: s.id, TTLMs: s.ttl(), Held: b.held.sorted(), Waiting: b.waiting.sorted(), Owner: s.owner()}
	for k := kindLock + 1; k < numKinds; k++ {
		b := s.bound(k)
		for _, name := range b.held.sorted() {
			si.Others = append(si.Others, Binding{Primitive: primitiveNames[k], Name: name})
		}
		for _, name := range b.waiting.sorted() {
			si.Others = append(si.Others, Binding{Primitive: primitiveNames[k], Name: name, Waiting: true})
		}
	}
	return si
}
