package checker

import (
	"fmt"

	"github.com/fenced-dev/fenced/check/history"
)

// Elections replays the committed leadership grants (merged by Raft
// index as for MutualExclusion) and checks the election's promise
// (docs/design.md §9):
//
//   - one leader per election at a time: a leadership granted while
//     another of the same election is in force is a violation ("two
//     leaders");
//   - one leader per term and terms in order: each leadership's term
//     token is above that of every earlier leadership of the election
//     ("term order"). (That a term token is granted to one session only
//     is TokenOrder's rule over every grant.)
//
// A leadership is in force from its grant until its release (resign, loss)
// or its session's expiry. Violations have Check "election".
func Elections(h history.History) []Violation {
	v := newViolationSet(ElectionCheck)
	last := map[string]history.Op{}
	replayGrants(h, []string{history.GrantLeader}, func(live liveGrants, g history.Op) {
		for _, o := range live.of(g.Name) {
			v.add("two leaders", fmt.Sprintf("election %q made session %d leader (term token %d) at log index %d while session %d led (term token %d, since index %d)",
				g.Name, g.Session, g.Token, g.Seq, o.Session, o.Token, o.Seq), o, g)
		}
		if p, ok := last[g.Name]; ok && g.Token <= p.Token {
			v.add("term order", fmt.Sprintf("election %q made session %d leader with term token %d at log index %d after session %d had led with term token %d (index %d): terms must increase",
				g.Name, g.Session, g.Token, g.Seq, p.Session, p.Token, p.Seq), p, g)
		}
		if p, ok := last[g.Name]; !ok || g.Token > p.Token {
			last[g.Name] = g
		}
	})
	return v.list()
}
