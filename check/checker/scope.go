package checker

import (
	"fmt"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/check/history"
)

// Scopes checks the fenced kv's scope rule (docs/design.md §10,
// docs/scopes.md) on the writes it accepted (Kind write, Outcome OK): the
// token of each must be that of a committed grant (every node's server
// events; each records the grant's kind and scope) whose scope covers the
// key (fence.ScopeCovers) and that is not a read grant of a read/write
// lock. A write whose grant's scope does not cover its key ("scope"), a
// write with a read grant's token ("read token") and, when the history has
// server events at all, a write whose token no committed grant carries
// ("no grant") are violations. A grant recorded without a scope (a
// history from before scopes) is taken to have its name as its scope. The workers' cross-scope attacks
// (history.Op.Target on a write) are what this catches; every other write
// is judged the same way. Violations have Check "scope".
//
// The checker does not judge whether the grant was still in force when
// the write was applied (the kv refuses an ended grant's token too): the
// history has no common clock for a client's write and the server's apply.
func Scopes(h history.History) []Violation {
	v := newViolationSet(ScopeCheck)
	grants := map[uint64]history.Op{}
	for _, op := range h {
		if op.Kind == history.OpServerGrant {
			if _, ok := grants[op.Token]; !ok {
				grants[op.Token] = op
			}
		}
	}
	for _, op := range h {
		if op.Kind != history.OpWrite || op.Outcome != history.OK {
			continue
		}
		attack := ""
		if op.Target != "" {
			attack = fmt.Sprintf(" (the %s attack)", op.Target)
		}
		g, ok := grants[op.Token]
		switch {
		case !ok && len(grants) > 0:
			v.add("no grant", fmt.Sprintf("key %q: write with token %d was accepted, but no committed grant has that token%s (%s)",
				op.Key, op.Token, attack, opLabel(op)), op)
		case !ok:
		case g.GrantKind == history.GrantRead:
			v.add("read token", fmt.Sprintf("key %q: write with token %d of the read grant of %q was accepted%s: a read grant is authority for reading only (%s; %s)",
				op.Key, op.Token, g.Name, attack, opLabel(g), opLabel(op)), g, op)
		case !fence.ScopeCovers(grantScope(g), op.Key):
			v.add("scope", fmt.Sprintf("key %q: write with token %d of the %s grant of scope %q was accepted%s, but that scope does not cover the key (%s; %s)",
				op.Key, op.Token, kindName(g), grantScope(g), attack, opLabel(g), opLabel(op)), g, op)
		}
	}
	return v.list()
}

// grantScope is a committed grant's scope; a history recorded before
// scopes has none, and then the grant's name stands for it (the scope of a
// lock, a write grant and a leadership is the name).
func grantScope(g history.Op) string {
	if g.Scope == "" {
		return g.Name
	}
	return g.Scope
}

// kindName is a grant's kind, "lock" for a history recorded before kinds.
func kindName(g history.Op) string {
	if g.GrantKind == "" {
		return history.GrantLock
	}
	return g.GrantKind
}
