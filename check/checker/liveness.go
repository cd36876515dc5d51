package checker

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/fenced-dev/fenced/check/history"
)

// Liveness checks that the cluster recovers once the faults are
// healed: when o.HealedAt is set, every process in o.LiveProcesses must
// complete an acquire that was granted, a queue claim or a latch
// create or count-down (Outcome OK; see progressed) at or after HealedAt
// and no later than HealedAt + o.LivenessBound (any time before the
// history ends when the bound is zero). The acquire may have been invoked
// before HealedAt and been in flight across it.
//
// Violations have Check "liveness" and carry the process's last
// operations.
func Liveness(h history.History, o Options) []Violation {
	if o.HealedAt == 0 {
		return nil
	}
	v := newViolationSet(LivenessCheck)
	deadline := int64(0)
	if o.LivenessBound > 0 {
		deadline = o.HealedAt + int64(o.LivenessBound)
	}
	live := map[string]bool{}
	for _, p := range o.LiveProcesses {
		live[p] = true
	}
	granted := map[string]bool{}
	ops := map[string][]history.Op{}
	for _, op := range h {
		if !live[op.Process] {
			continue
		}
		ops[op.Process] = append(ops[op.Process], op)
		if progressed(op) && op.Complete >= o.HealedAt && (deadline == 0 || op.Complete <= deadline) {
			granted[op.Process] = true
		}
	}
	within := "before the history ended"
	if deadline != 0 {
		within = "within " + o.LivenessBound.String()
	}
	seen := map[string]bool{}
	for _, p := range o.LiveProcesses {
		if granted[p] || seen[p] {
			continue
		}
		seen[p] = true
		mine := ops[p]
		if len(mine) == 0 {
			v.add("no grant after heal", fmt.Sprintf("process %s got no grant %s after every fault was healed: it recorded no operations at all", p, within))
			continue
		}
		sort.SliceStable(mine, func(i, j int) bool { return mine[i].Invoke < mine[j].Invoke })
		last := mine[max(0, len(mine)-3):]
		tries, grants := 0, 0
		for _, op := range mine {
			if op.Kind != history.OpAcquire || op.Complete < o.HealedAt {
				continue
			}
			tries++
			if op.Outcome == history.OK {
				grants++
			}
		}
		var acq string
		switch {
		case tries == 0:
			acq = "no acquire completed after the heal"
		case grants == 0:
			acq = nounCount(tries, "acquire") + " completed after the heal, none granted"
		default:
			acq = fmt.Sprintf("%s completed after the heal, %d granted but too late", nounCount(tries, "acquire"), grants)
		}
		lastDesc := make([]string, len(last))
		for i, op := range last {
			if d := time.Duration(op.Invoke - o.HealedAt); d >= 0 {
				lastDesc[i] = fmt.Sprintf("%s invoked %v after the heal", opLabel(op), d)
			} else {
				lastDesc[i] = fmt.Sprintf("%s invoked %v before the heal", opLabel(op), -d)
			}
		}
		v.add("no grant after heal", fmt.Sprintf("process %s got no grant %s after every fault was healed (%s); its last operations: %s",
			p, within, acq, strings.Join(lastDesc, "; ")), last...)
	}
	return v.list()
}

// progressed reports whether op shows its process served: an acquire that
// was granted, a queue claim, or a latch operation answered (a latch
// issues no grant).
func progressed(op history.Op) bool {
	switch op.Kind {
	case history.OpAcquire, history.OpClaim, history.OpLatchCreate, history.OpCountDown:
		return op.Outcome == history.OK
	}
	return false
}
