package checker

import (
	"fmt"

	"github.com/fenced-dev/fenced/check/history"
)

// RWExclusion replays the committed grants of read/write locks (merged by
// Raft index as for MutualExclusion) and checks that a writer never holds
// a lock with anyone else (docs/design.md §9):
//
//   - a write grant while any read or write grant of the lock is in force
//     is a violation ("writer with others");
//   - a read grant while a write grant of the lock is in force is a
//     violation ("reader with writer").
//
// A grant is in force from its grant until its release or its session's
// expiry. Violations have Check "rw-exclusion".
func RWExclusion(h history.History) []Violation {
	v := newViolationSet(RWExclusionCheck)
	replayGrants(h, []string{history.GrantRead, history.GrantWrite}, func(live liveGrants, g history.Op) {
		for _, o := range live.of(g.Name) {
			switch {
			case g.GrantKind == history.GrantWrite:
				v.add("writer with others", fmt.Sprintf("read/write lock %q granted a writer (session %d, token %d) at log index %d while session %d held a %s grant (token %d, granted at index %d)",
					g.Name, g.Session, g.Token, g.Seq, o.Session, o.GrantKind, o.Token, o.Seq), o, g)
			case o.GrantKind == history.GrantWrite:
				v.add("reader with writer", fmt.Sprintf("read/write lock %q granted a reader (session %d, token %d) at log index %d while session %d held it for writing (token %d, granted at index %d)",
					g.Name, g.Session, g.Token, g.Seq, o.Session, o.Token, o.Seq), o, g)
			}
		}
	})
	return v.list()
}
