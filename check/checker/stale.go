package checker

import (
	"fmt"
	"sort"

	"github.com/fenced-dev/fenced/check/history"
)

// StaleWrites checks the fenced kv's promise (docs/design.md §1, condition 3)
// on the writes it accepted (Kind write, Outcome OK), key by key:
//
//   - in version order, which is commit order, tokens never decrease: a
//     write accepted below the key's watermark is a stale write let through;
//   - two accepted writes never get the same version;
//   - no accepted write carries a token lower than that of an accepted
//     write that completed before it was invoked (real time).
//
// Violations have Check "stale-write".
func StaleWrites(h history.History) []Violation {
	v := newViolationSet(StaleWriteCheck)
	byKey := map[string][]int{}
	for i, op := range h {
		if op.Kind == history.OpWrite && op.Outcome == history.OK {
			byKey[op.Key] = append(byKey[op.Key], i)
		}
	}
	for _, key := range sortedMapKeys(byKey) {
		ws := byKey[key]
		flagged := map[int]bool{}
		byVersion := append([]int(nil), ws...)
		sort.SliceStable(byVersion, func(i, j int) bool { return h[byVersion[i]].Version < h[byVersion[j]].Version })
		mark := -1 // the accepted write that set the watermark so far
		for n, i := range byVersion {
			w := h[i]
			if n > 0 {
				if p := h[byVersion[n-1]]; p.Version == w.Version {
					v.add("duplicate version", fmt.Sprintf("key %q: two accepted writes got version %d: %s and %s",
						key, w.Version, opLabel(p), opLabel(w)), p, w)
					flagged[i] = true
				}
			}
			if mark >= 0 && w.Token < h[mark].Token {
				m := h[mark]
				v.add("version order", fmt.Sprintf("key %q: write with token %d was accepted as version %d after version %d had raised the watermark to token %d (%s; %s)",
					key, w.Token, w.Version, m.Version, m.Token, opLabel(m), opLabel(w)), m, w)
				flagged[i] = true
			}
			if mark < 0 || w.Token > h[mark].Token {
				mark = i
			}
		}
		for _, r := range realTimeInversions(h, ws) {
			if flagged[r.after] {
				continue
			}
			a, b := h[r.before], h[r.after]
			v.add("real-time order", fmt.Sprintf("key %q: write with token %d was accepted (version %d) although it was invoked %v after a write with token %d had been accepted (version %d) (%s; %s)",
				key, b.Token, b.Version, sinceCompleted(a, b), a.Token, a.Version, opLabel(a), opLabel(b)), a, b)
		}
	}
	return v.list()
}
