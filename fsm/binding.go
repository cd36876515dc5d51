package fsm

import (
	"sort"

	fence "github.com/fenced-dev/fenced"
)

// kind identifies a primitive in the session bindings.
type kind int

// The session-bound primitives, in the order a session's end releases
// them. A new primitive adds its kind before numKinds.
const (
	kindLock kind = iota
	kindSemaphore
	kindElection
	kindRWLock
	kindQueue
	numKinds
)

// binding is what one session holds and waits for in one primitive, by
// object name. It is how grants hang off sessions: ending a session ends
// every binding it has (Machine.endSession), in every primitive. A
// session changes its bindings through its own methods (hold, unhold,
// wait, unwait), which also count them for its owner's quota (quota.go),
// and reads them with bound.
//
// A set stays allocated once it has grown (nameSet), so a session that
// takes and gives up the same kind of grant again and again allocates
// nothing for it.
type binding struct {
	held    nameSet
	waiting nameSet
}

// noBinding is the binding of a primitive a session never used: bound
// returns it for reading, and nothing changes it.
var noBinding binding

// bound returns the session's binding in primitive k, for reading only:
// a primitive the session never used has the empty noBinding.
func (s *session) bound(k kind) *binding {
	if k == kindLock {
		return &s.lock
	}
	if s.others == nil {
		return &noBinding
	}
	return &s.others[k-1]
}

// bind returns the session's binding in primitive k for a change, making
// the bindings of the other primitives on first use: nearly every session
// only ever holds locks, and keeps no room for the others.
func (s *session) bind(k kind) *binding {
	if k == kindLock {
		return &s.lock
	}
	if s.others == nil {
		s.others = new([numKinds - 1]binding)
	}
	return &s.others[k-1]
}

// hold binds object name of primitive k to the session as held.
func (s *session) hold(k kind, name string) {
	if s.bind(k).held.add(name) && s.use != nil {
		s.use.held++
	}
}

// unhold takes object name of primitive k out of what the session holds.
func (s *session) unhold(k kind, name string) {
	if s.bound(k).held.has(name) && s.bind(k).held.remove(name) && s.use != nil {
		s.use.held--
	}
}

// wait binds object name of primitive k to the session as waited for.
func (s *session) wait(k kind, name string) {
	if s.bind(k).waiting.add(name) && s.use != nil {
		s.use.waiting++
	}
}

// unwait takes object name of primitive k out of what the session waits
// for.
func (s *session) unwait(k kind, name string) {
	if s.bound(k).waiting.has(name) && s.bind(k).waiting.remove(name) && s.use != nil {
		s.use.waiting--
	}
}

// end calls leave for every object the session waits for, then release
// for every object it holds, each in name order, so that every replica
// promotes waiters, and so issues tokens, in the same order.
func (b *binding) end(leave, release func(name string)) {
	for _, name := range b.waiting.sorted() {
		leave(name)
	}
	for _, name := range b.held.sorted() {
		release(name)
	}
}

// sortedKeys returns the keys of a map by name in sorted order: every walk
// over a map whose order is visible (tokens, snapshots) goes through it.
func sortedKeys[V any](byName map[string]V) []string {
	keys := make([]string, 0, len(byName))
	for k := range byName {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// enqueue queues session s on q, the queue of object name of primitive k,
// for the request seq asking for a grant of kind gk; a session already
// queued keeps its place.
func (m *Machine) enqueue(k kind, gk fence.Kind, name string, q *waitQueue, s *session, seq uint64) {
	if q.push(waiter{session: s.id, seq: seq, kind: gk}) {
		s.wait(k, name)
	}
}

// leaveQueue takes session s out of q, the queue of object name of
// primitive k, and pushes the end of its wait (Observer.WaitEnded, with
// the kind of grant it waited for) to the call waiting for it. It reports
// false, changing nothing, when s is nil or not queued.
func (m *Machine) leaveQueue(k kind, name string, q *waitQueue, s *session) bool {
	if s == nil {
		return false
	}
	w, ok := q.remove(s.id)
	if !ok {
		return false
	}
	s.unwait(k, name)
	m.obs.WaitEnded(w.kind, name, s.id)
	return true
}

// promote grants object name of primitive k, with scope, to the first
// waiter of q: it issues the grant (Machine.issueGrant, of the kind the
// waiter asked for), binds it to the waiter's session as held and records
// it as the result of the request that queued it. The primitive then
// records the holder and pushes the grant (Observer.Granted). It returns
// the waiter and the grant, or false when none waits. The caller checked
// tokens.exhausted.
func (m *Machine) promote(k kind, name, scope string, q *waitQueue, now int64) (waiter, fence.Grant, bool) {
	w, ok := q.pop()
	if !ok {
		return waiter{}, fence.Grant{}, false
	}
	g := m.issueGrant(w.kind, name, scope, w.session, now)
	s := m.sessions[w.session]
	s.unwait(k, name)
	s.hold(k, name)
	s.replies.promote(w.seq, g.Token, now)
	return w, g, true
}
