package checker

import (
	"fmt"

	"github.com/fenced-dev/fenced/check/history"
)

// MutualExclusion replays the committed events of the cluster (every
// node's server events, merged and de-duplicated by Raft index, in each
// node's order within one index) and checks that no two sessions hold one
// exclusive lock at once in the state machine (docs/design.md §7); the
// grants of other primitives are checked by Semaphores, RWExclusion and
// Elections:
//
//   - server_grant of name N to session S while another session holds N is
//     a violation; the grant then replaces the holder, so that replay goes
//     on;
//   - server_release (Name, Session) frees N if Session holds it;
//   - server_expire (Session) frees every lock the session holds.
//
// It does nothing when the history has no server events. Violations have
// Check "mutual-exclusion".
func MutualExclusion(h history.History) []Violation {
	v := newViolationSet(MutualExclusionCheck)
	log := mergeServerEvents(h)
	holders := map[string]history.Op{}       // name -> the grant that holds it
	held := map[uint64]map[string]struct{}{} // session -> names it holds
	free := func(name string) {
		g, ok := holders[name]
		if !ok {
			return
		}
		delete(holders, name)
		if names := held[g.Session]; names != nil {
			delete(names, name)
			if len(names) == 0 {
				delete(held, g.Session)
			}
		}
	}
	for _, b := range log.batches {
		for _, op := range b.events {
			if op.Kind != history.OpServerExpire && !op.IsLock() {
				continue // another primitive's grant: see semaphore.go, rwlock.go, election.go
			}
			switch op.Kind {
			case history.OpServerGrant:
				if g, ok := holders[op.Name]; ok && g.Session != op.Session {
					v.add("grant while held", fmt.Sprintf("lock %q was granted to session %d (token %d) at log index %d while session %d held it (token %d, granted at index %d)",
						op.Name, op.Session, op.Token, op.Seq, g.Session, g.Token, g.Seq), g, op)
				}
				free(op.Name)
				holders[op.Name] = op
				if held[op.Session] == nil {
					held[op.Session] = map[string]struct{}{}
				}
				held[op.Session][op.Name] = struct{}{}
			case history.OpServerRelease:
				if g, ok := holders[op.Name]; ok && g.Session == op.Session {
					free(op.Name)
				}
			case history.OpServerExpire:
				for name := range held[op.Session] {
					free(name)
				}
			}
		}
	}
	return v.list()
}
