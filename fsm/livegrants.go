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

// liveGrant is one grant in force.
type liveGrant struct {
	kind     fence.Kind
	name     string // the primitive's object
	scope    string
	session  uint64
	issuedAt int64
}

// liveGrants indexes the grants in force by token. Tokens are unique over
// all grants (one counter), so a token names at most one grant.
type liveGrants struct {
	byToken map[fence.Token]liveGrant
}

func (l *liveGrants) add(tok fence.Token, g liveGrant) {
	if l.byToken == nil {
		l.byToken = make(map[fence.Token]liveGrant)
	}
	l.byToken[tok] = g
}

// get returns the grant in force with token tok.
func (l *liveGrants) get(tok fence.Token) (liveGrant, bool) {
	g, ok := l.byToken[tok]
	return g, ok
}

// issueGrant takes the next token for a grant of kind k on object name
// with scope, held by session sid from now (Unix ms), registers it in the
// live index and returns it. The caller checked tokens.exhausted before
// changing anything; it records the token in its own state, binds the
// object to the session and pushes the grant (Observer.Granted).
func (m *Machine) issueGrant(k fence.Kind, name, scope string, sid uint64, now int64) fence.Grant {
	tok, _ := m.tokens.next() // exhaustion was checked by the caller
	m.live.add(tok, liveGrant{kind: k, name: name, scope: scope, session: sid, issuedAt: now})
	return m.grant(k, name, scope, tok, sid, now)
}

// endGrant takes the grant with token tok out of the live index and pushes
// its end (Observer.Released) with reason. From then on its token is
// authority for nothing in the fenced kv.
func (m *Machine) endGrant(tok fence.Token, reason EndReason) {
	g, ok := m.live.get(tok)
	if !ok {
		return
	}
	delete(m.live.byToken, tok)
	m.obs.Released(g.kind, g.name, g.session, tok, reason)
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
		g.TTL = msDuration(s.ttlMs)
	}
	return g
}

// rebuildLive fills the live index from every primitive's grants, after
// restore.
func (m *Machine) rebuildLive() {
	n := 0
	for _, p := range m.primitives {
		p.eachGrant(func(fence.Token, liveGrant) { n++ })
	}
	// Sized once: growing a map of a million grants rehashes it many times.
	m.live = liveGrants{byToken: make(map[fence.Token]liveGrant, n)}
	for _, p := range m.primitives {
		p.eachGrant(m.live.add)
	}
}

// GrantOf returns the grant in force with token tok, if any.
func (m *Machine) GrantOf(tok fence.Token) (fence.Grant, bool) {
	g, ok := m.live.get(tok)
	if !ok {
		return fence.Grant{}, false
	}
	return m.grant(g.kind, g.name, g.scope, tok, g.session, g.issuedAt), true
}

// checkLive reports a live index that differs from the grants the
// primitives hold.
func (m *Machine) checkLive() error {
	want := liveGrants{byToken: make(map[fence.Token]liveGrant, len(m.live.byToken))}
	for _, p := range m.primitives {
		p.eachGrant(func(tok fence.Token, g liveGrant) {
			if _, dup := want.byToken[tok]; dup {
				want.add(tok, liveGrant{kind: "duplicate"})
				return
			}
			want.add(tok, g)
		})
	}
	if len(want.byToken) != len(m.live.byToken) {
		return broken("the live-grant index has %d grants, the primitives hold %d", len(m.live.byToken), len(want.byToken))
	}
	for tok, g := range want.byToken {
		if g.kind == "duplicate" {
			return broken("two grants hold token %d", tok)
		}
		if got, ok := m.live.byToken[tok]; !ok || got != g {
			return broken("the live-grant index has %s for token %d, the primitives hold %s", got, tok, g)
		}
	}
	return nil
}

func (g liveGrant) String() string {
	if g.kind == "" {
		return "nothing"
	}
	return fmt.Sprintf("%s %q (scope %q, session %d)", g.kind, g.name, g.scope, g.session)
}
