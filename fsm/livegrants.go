package fsm

import (
	"fmt"
	"time"

	fence "github.com/fenced-dev/fenced"
)

// The live-grant index: every grant in force, by token, with its kind and
// scope. Every primitive issues its grants with Machine.issueGrant and
// ends them with Machine.endGrant, so the index always lists exactly the
// grants the primitives hold; the fenced kv asks it which scope a token
// was issued for (kv.go). It is not in the snapshot: restore rebuilds it
// from the primitives' own sections (primitive.eachGrant), and
// checkInvariants compares it with them.

// liveGrant is one grant in force. There is one a holder, so its kind is
// a byte (kindCode), not the 16 bytes of a fence.Kind.
type liveGrant struct {
	name     string // the primitive's object
	scope    string
	session  uint64
	issuedAt int64
	kind     grantKind
}

// grantKind is a fence.Kind as a byte: its index in grantKinds.
type grantKind uint8

// grantKinds are the kinds a grant has, by grantKind; 0 is none.
var grantKinds = [...]fence.Kind{"", fence.KindLock, fence.KindRead, fence.KindWrite, fence.KindPermit, fence.KindLeader, fence.KindClaim}

// kindCode returns k's grantKind; a kind not in grantKinds is a bug in
// this package.
func kindCode(k fence.Kind) grantKind {
	switch k {
	case fence.KindLock:
		return 1
	case fence.KindRead:
		return 2
	case fence.KindWrite:
		return 3
	case fence.KindPermit:
		return 4
	case fence.KindLeader:
		return 5
	case fence.KindClaim:
		return 6
	}
	panic(fmt.Sprintf("fsm: grant kind %q is not in grantKinds", k))
}

// of returns the fence.Kind of c.
func (c grantKind) of() fence.Kind { return grantKinds[c] }

// liveGrants indexes the grants in force by token. Tokens are unique over
// all grants (one counter), so a token names at most one grant.
//
// An exclusive lock's grant is the lock itself: the lock keeps the
// grant's name (its scope too), holder, token and time, so its entry is a
// pointer, 16 bytes a slot with the token, against 64 for a liveGrant.
// Locks are most of the grants at scale (a million holders, one lock
// each: 127 MB of index in the heap profile, a map of 2M slots).
type liveGrants struct {
	locks   map[fence.Token]*lock     // the exclusive locks' grants
	byToken map[fence.Token]liveGrant // every other kind's
}

func (l *liveGrants) add(tok fence.Token, g liveGrant) {
	if l.byToken == nil {
		l.byToken = make(map[fence.Token]liveGrant)
	}
	l.byToken[tok] = g
}

// addLock registers lock lk's grant, with token tok: the lock records it
// as its own (lock.holder, token and issuedAt) before anything reads it.
func (l *liveGrants) addLock(tok fence.Token, lk *lock) {
	if l.locks == nil {
		l.locks = make(map[fence.Token]*lock)
	}
	l.locks[tok] = lk
}

// get returns the grant in force with token tok.
func (l *liveGrants) get(tok fence.Token) (liveGrant, bool) {
	if lk, ok := l.locks[tok]; ok {
		return lk.liveGrant(), true
	}
	g, ok := l.byToken[tok]
	return g, ok
}

// count returns how many grants the index holds.
func (l *liveGrants) count() int { return len(l.locks) + len(l.byToken) }

// issueGrant takes the next token for a grant of kind k on object name
// with scope, held by session sid from now (Unix ms), registers it in the
// live index and returns it. The caller checked tokens.exhausted before
// changing anything; it records the token in its own state, binds the
// object to the session and pushes the grant (Observer.Granted). A lock's
// grant is registered by the lock table once the lock records it
// (liveGrants.addLock), and ended with endLockGrant.
func (m *Machine) issueGrant(k fence.Kind, name, scope string, sid uint64, now int64) fence.Grant {
	tok, _ := m.tokens.next() // exhaustion was checked by the caller
	if k != fence.KindLock {
		m.live.add(tok, liveGrant{kind: kindCode(k), name: name, scope: scope, session: sid, issuedAt: now})
	}
	return m.grant(k, name, scope, tok, sid, now)
}

// endGrant takes the grant with token tok out of the live index and pushes
// its end (Observer.Released) with reason. From then on its token is
// authority for nothing in the fenced kv.
func (m *Machine) endGrant(tok fence.Token, reason EndReason) {
	g, ok := m.live.byToken[tok]
	if !ok {
		return
	}
	delete(m.live.byToken, tok)
	m.obs.Released(g.kind.of(), g.name, g.session, tok, g.issuedAt, reason)
}

// endLockGrant is endGrant for lock lk's grant, before the lock forgets
// it.
func (m *Machine) endLockGrant(lk *lock, reason EndReason) {
	if _, ok := m.live.locks[lk.token]; !ok {
		return
	}
	delete(m.live.locks, lk.token)
	m.obs.Released(fence.KindLock, lk.name, lk.holder, lk.token, lk.issuedAt, reason)
}

// grant describes a grant of kind k on object name with scope, token tok,
// held by session sid since issuedAt (Unix ms), with the session's TTL.
func (m *Machine) grant(k fence.Kind, name, scope string, tok fence.Token, sid uint64, issuedAt int64) fence.Grant {
	g := fence.Grant{
		Name:     name,
		Kind:     k,
		Scope:    scope,
		Token:    tok,
		Issuer:   m.issuer,
		Session:  sid,
		IssuedAt: time.UnixMilli(issuedAt).UTC(),
	}
	if s := m.sessions[sid]; s != nil {
		g.TTL = msDuration(s.ttl())
	}
	return g
}

// rebuildLive fills the live index from every primitive's grants, after
// restore, and reports two grants of one token (which the index, maps,
// would keep only one of). The index is then exactly the primitives'
// grants, which is what checkLive checks; checkRestored does not repeat
// it (a second walk of a million grants, at scale).
func (m *Machine) rebuildLive() error {
	// Sized once (growing a map of a million grants rehashes it many
	// times), for every lock held at most, without a walk to count them.
	n := 0
	for k, p := range m.primitives {
		if kind(k) != kindLock {
			p.eachGrant(func(fence.Token, liveGrant) { n++ })
		}
	}
	m.live = liveGrants{locks: make(map[fence.Token]*lock, len(m.locks.byName)), byToken: make(map[fence.Token]liveGrant, n)}
	added, twice := 0, false
	for _, l := range m.locks.byName {
		if l.holder != 0 {
			added++
			m.live.addLock(l.token, l)
		}
	}
	for k, p := range m.primitives {
		if kind(k) == kindLock {
			continue
		}
		p.eachGrant(func(tok fence.Token, g liveGrant) {
			added++
			if _, ok := m.live.locks[tok]; ok {
				twice = true
			}
			m.live.add(tok, g)
		})
	}
	if added == m.live.count() && !twice {
		return nil
	}
	toks := make([]fence.Token, 0, added)
	for _, p := range m.primitives {
		p.eachGrant(func(tok fence.Token, _ liveGrant) { toks = append(toks, tok) })
	}
	tok, _ := duplicateToken(toks)
	return broken("two grants hold token %d", tok)
}

// GrantOf returns the grant in force with token tok, if any.
func (m *Machine) GrantOf(tok fence.Token) (fence.Grant, bool) {
	g, ok := m.live.get(tok)
	if !ok {
		return fence.Grant{}, false
	}
	return m.grant(g.kind.of(), g.name, g.scope, tok, g.session, g.issuedAt), true
}

// checkLive reports a live index that differs from the grants the
// primitives hold. Each grant is looked up in the index, and the grants'
// tokens, sorted, must be distinct and as many as the index's: then the
// index holds exactly them, without a second index of a million grants
// built to compare.
func (m *Machine) checkLive() error {
	toks := make([]fence.Token, 0, m.live.count())
	var diff error
	for _, p := range m.primitives {
		p.eachGrant(func(tok fence.Token, g liveGrant) {
			toks = append(toks, tok)
			if got, ok := m.live.get(tok); diff == nil && (!ok || got != g) {
				diff = broken("the live-grant index has %s for token %d, the primitives hold %s", got, tok, g)
			}
		})
	}
	for _, l := range m.locks.byName { // a lock's entry is the lock itself
		if got := m.live.locks[l.token]; diff == nil && l.holder != 0 && got != l {
			diff = broken("the live-grant index has another lock than %q's for its token %d", l.name, l.token)
		}
	}
	if tok, dup := duplicateToken(toks); dup {
		return broken("two grants hold token %d", tok)
	}
	if len(toks) != m.live.count() {
		return broken("the live-grant index has %d grants, the primitives hold %d", m.live.count(), len(toks))
	}
	return diff
}

func (g liveGrant) String() string {
	if g.kind == 0 {
		return "nothing"
	}
	return fmt.Sprintf("%s %q (scope %q, session %d)", g.kind.of(), g.name, g.scope, g.session)
}
