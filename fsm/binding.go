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
// every binding it has (Machine.endSession), in every primitive.
//
// A set stays allocated once emptied (as a Go map does), so a session that
// takes and gives up the same kind of grant again and again allocates
// nothing for it.
type binding struct {
	held    *nameSet
	waiting *nameSet
	// use counts the bindings of every session of the same owner (quota.go);
	// nil for a session without an owner.
	use *usage
}

func (b *binding) hold(name string) {
	if b.held == nil {
		b.held = &nameSet{}
	}
	if b.held.add(name) && b.use != nil {
		b.use.held++
	}
}

func (b *binding) unhold(name string) {
	if !b.held.has(name) {
		return
	}
	b.held.remove(name)
	if b.use != nil {
		b.use.held--
	}
}

func (b *binding) wait(name string) {
	if b.waiting == nil {
		b.waiting = &nameSet{}
	}
	if b.waiting.add(name) && b.use != nil {
		b.use.waiting++
	}
}

func (b *binding) unwait(name string) {
	if !b.waiting.has(name) {
		return
	}
	b.waiting.remove(name)
	if b.use != nil {
		b.use.waiting--
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
		s.bound[k].wait(name)
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
	s.bound[k].unwait(name)
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
	s.bound[k].unwait(name)
	s.bound[k].hold(name)
	s.replies.promote(w.seq, g.Token, now)
	return w, g, true
}
