package checker

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/fenced-dev/fenced/check/history"
)

// Semaphores replays the committed grants of semaphore permits (every
// node's server events, merged by Raft index as for MutualExclusion) and
// checks the semaphore's promise (docs/design.md §9):
//
//   - a permit is never granted while capacity permits of the semaphore
//     are in force ("over capacity"); the capacity is the one the workers'
//     acquires asked for (OpAcquire.Capacity), and the rule is skipped for
//     a semaphore no acquire named a capacity of;
//   - a permit's slot (its scope "name/slot") is 0 to capacity-1 ("slot
//     range") and differs from the slot of every permit in force ("duplicate
//     slot"), so the resource of a slot has one holder at a time.
//
// A permit is in force from its grant until its release or its session's
// expiry. Violations have Check "semaphore".
func Semaphores(h history.History) []Violation {
	v := newViolationSet(SemaphoreCheck)
	capacity := map[string]int{}
	for _, op := range h {
		if op.Kind == history.OpAcquire && op.GrantKind == history.GrantPermit && op.Capacity > capacity[op.Name] {
			capacity[op.Name] = op.Capacity
		}
	}
	replayGrants(h, []string{history.GrantPermit}, func(live liveGrants, g history.Op) {
		held := live.of(g.Name)
		if c := capacity[g.Name]; c > 0 && len(held) >= c {
			v.add("over capacity", fmt.Sprintf("semaphore %q of capacity %d granted a permit (slot %s, session %d, token %d) at log index %d while %s were in force (tokens %s)",
				g.Name, c, slotText(g), g.Session, g.Token, g.Seq, nounCount(len(held), "permit"), tokenList(held)), append(held, g)...)
		}
		slot, ok := slotOf(g)
		if !ok || (capacity[g.Name] > 0 && slot >= capacity[g.Name]) {
			v.add("slot range", fmt.Sprintf("semaphore %q granted a permit with scope %q (token %d, log index %d): want %q/0 to %q/%d",
				g.Name, g.Scope, g.Token, g.Seq, g.Name, g.Name, max(capacity[g.Name]-1, 0)), g)
			return
		}
		for _, p := range held {
			if s, ok := slotOf(p); ok && s == slot {
				v.add("duplicate slot", fmt.Sprintf("semaphore %q granted slot %d to session %d (token %d) at log index %d while session %d held it (token %d, granted at index %d)",
					g.Name, slot, g.Session, g.Token, g.Seq, p.Session, p.Token, p.Seq), p, g)
			}
		}
	})
	return v.list()
}

// slotOf is the slot of a permit: the number after "name/" in its scope.
func slotOf(g history.Op) (int, bool) {
	rest, ok := strings.CutPrefix(g.Scope, g.Name+"/")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n >= 0
}

func slotText(g history.Op) string {
	if s, ok := slotOf(g); ok {
		return strconv.Itoa(s)
	}
	return fmt.Sprintf("of scope %q", g.Scope)
}

// tokenList is "3, 7, 9".
func tokenList(ops []history.Op) string {
	parts := make([]string, len(ops))
	for i, op := range ops {
		parts[i] = strconv.FormatUint(op.Token, 10)
	}
	return strings.Join(parts, ", ")
}
