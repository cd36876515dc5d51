package checker

import (
	"fmt"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fenced-dev/fenced/check/history"
)

// Linearizable checks with porcupine that the kv and the locks behave
// like single copies, each key and each name on its own:
//
//   - kv (model "kv", one partition per key): a register with a watermark;
//     see kvStep. Writes that were accepted, rejected as stale or whose
//     outcome is unknown, and reads that answered, take part.
//   - locks (model "lock", one partition per name): every grant's token
//     is above the last one granted, or is the last one again for the same
//     session; see lockModel. Granted acquires of exclusive locks take
//     part (the other primitives' grants are checked on the committed
//     history: Semaphores, RWExclusion, Elections, TokenOrder).
//
// Operations whose outcome is unknown may have taken effect at any time
// after their invocation, or never: porcupine sees them complete after the
// end of the history, and the model allows both.
//
// A partition that is not linearizable is reported with the operations
// that show it (the last operations porcupine could linearize and the one
// it could not). With o.OutDir set, porcupine's visualisation of the
// failing partitions is written to OutDir/linearizability-<model>.html.
// A search that runs out of time (o.LinearizableTimeout per model; the
// partitions share it and run in parallel) is reported as
// "linearizability check timed out (unknown)": undecided, not a proof of
// either. Explaining failed partitions runs porcupine on them again, in
// as much time again at most.
//
// Violations have Check "linearizability".
func Linearizable(h history.History, o Options) []Violation {
	v := newViolationSet(LinearizabilityCheck)
	timeout := o.LinearizableTimeout
	if timeout <= 0 {
		timeout = DefaultLinearizableTimeout
	}
	for _, m := range []linModel{kvLinModel(h), lockLinModel(h)} {
		m.check(h, timeout, o.OutDir, v)
	}
	return v.list()
}

// linMeta is the metadata of an operation given to porcupine: where it
// comes from.
type linMeta struct {
	part  string // key or lock name
	index int    // index in the history
	label string // for the visualisation
}

func describeLinMeta(info interface{}) string {
	if m, ok := info.(linMeta); ok {
		return m.label
	}
	return ""
}

// linPartition is the operations of one key or one name.
type linPartition struct {
	id  string
	ops []porcupine.Operation
}

// linModel is one porcupine model and the history split for it.
type linModel struct {
	name  string // "kv" or "lock"
	noun  string // "key" or "lock"
	model porcupine.Model
	parts []linPartition
	// explain describes why op (the first one porcupine could not
	// linearize) fails after prefix, and picks the operations to show.
	explain func(h history.History, part, prefix []porcupine.Operation, op porcupine.Operation) (string, []int)
}

// linTimes assigns porcupine client ids and the time after the history's
// end at which operations of unknown outcome complete.
type linTimes struct {
	horizon int64
	clients map[string]int
}

func newLinTimes(h history.History) linTimes {
	t := linTimes{clients: map[string]int{}}
	var procs []string
	for _, op := range h {
		t.horizon = max(t.horizon, op.Invoke, op.Complete)
		if _, ok := t.clients[op.Process]; !ok && !isServerEvent(op) {
			t.clients[op.Process] = 0
			procs = append(procs, op.Process)
		}
	}
	t.horizon++
	sort.Strings(procs)
	for i, p := range procs {
		t.clients[p] = i
	}
	return t
}

func (t linTimes) operation(h history.History, i int, part string, in, out interface{}) porcupine.Operation {
	op := h[i]
	ret := max(op.Complete, op.Invoke)
	if op.Outcome == history.Unknown {
		ret = t.horizon
	}
	label := op.Process
	if op.Error != "" {
		label += ": " + op.Error
	}
	return porcupine.Operation{
		ClientId: t.clients[op.Process],
		Input:    in,
		Call:     op.Invoke,
		Output:   out,
		Return:   ret,
		Metadata: linMeta{part: part, index: i, label: label},
	}
}

// partitionsOf groups operations by their linMeta part in order of first
// appearance.
func partitionsOf(ops []porcupine.Operation) [][]porcupine.Operation {
	idx := map[string]int{}
	var out [][]porcupine.Operation
	for _, op := range ops {
		p := op.Metadata.(linMeta).part
		i, ok := idx[p]
		if !ok {
			i = len(out)
			idx[p] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], op)
	}
	return out
}

func kvLinModel(h history.History) linModel {
	t := newLinTimes(h)
	byKey := map[string][]porcupine.Operation{}
	for i, op := range h {
		if in, out, ok := kvOperation(op); ok {
			byKey[op.Key] = append(byKey[op.Key], t.operation(h, i, op.Key, in, out))
		}
	}
	m := linModel{name: "kv", noun: "key", model: kvModel(), explain: explainKV}
	for _, key := range sortedMapKeys(byKey) {
		ops := byKey[key]
		delayUnknownWrites(h, ops)
		m.parts = append(m.parts, linPartition{id: key, ops: ops})
	}
	return m
}

// delayUnknownWrites narrows the search over the writes of one key whose
// outcome is unknown. Each of them is open until the end of the history,
// and porcupine tries it at every point from its invocation on: with many
// of them (a long partition) proving a failure takes exponential time.
//
// Versions say where such a write can have been applied. Every applied
// write takes the next version, so no two take the same one. Let g be the
// lowest version no accepted write reported: versions 1 to g-1 all belong
// to accepted writes, so a write of unknown outcome, if it was applied,
// took version g or higher, and was applied after the accepted write with
// version g-1. Its invocation can therefore be moved to that write's
// invocation when that is later, without changing which histories
// linearize. (Not applied, it may be put anywhere: the model allows it to
// have no effect at any point.)
func delayUnknownWrites(h history.History, ops []porcupine.Operation) {
	claimed := map[uint64]int64{} // version -> earliest invocation of an accepted write with it
	for _, op := range ops {
		w := h[op.Metadata.(linMeta).index]
		if w.Kind != history.OpWrite || w.Outcome != history.OK {
			continue
		}
		if at, ok := claimed[w.Version]; !ok || w.Invoke < at {
			claimed[w.Version] = w.Invoke
		}
	}
	g := uint64(1)
	for {
		if _, ok := claimed[g]; !ok {
			break
		}
		g++
	}
	if g == 1 {
		return
	}
	after := claimed[g-1]
	for i, op := range ops {
		if h[op.Metadata.(linMeta).index].Kind == history.OpWrite && op.Output.(kvModelOutput).outcome == history.Unknown && op.Call < after {
			ops[i].Call = after
		}
	}
}

func lockLinModel(h history.History) linModel {
	t := newLinTimes(h)
	byName := map[string][]porcupine.Operation{}
	for i, op := range h {
		if op.Kind == history.OpAcquire && op.Outcome == history.OK && op.IsLock() {
			byName[op.Name] = append(byName[op.Name], t.operation(h, i, op.Name, lockModelInput{token: op.Token, session: op.Session}, nil))
		}
	}
	m := linModel{name: "lock", noun: "lock", model: lockModel(), explain: explainLock}
	for _, name := range sortedMapKeys(byName) {
		m.parts = append(m.parts, linPartition{id: name, ops: byName[name]})
	}
	return m
}

// check runs porcupine on every partition, several at once, within one
// shared time budget, then explains the partitions that failed.
func (m linModel) check(h history.History, timeout time.Duration, outDir string, v *violationSet) {
	if len(m.parts) == 0 {
		return
	}
	deadline := time.Now().Add(timeout)
	results := make([]porcupine.CheckResult, len(m.parts))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(runtime.GOMAXPROCS(0), len(m.parts)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				rem := time.Until(deadline)
				if rem <= 0 {
					results[i] = porcupine.Unknown
					continue
				}
				results[i] = porcupine.CheckOperationsTimeout(m.model, m.parts[i].ops, rem)
			}
		}()
	}
	for i := range m.parts {
		next <- i
	}
	close(next)
	wg.Wait()

	var failed []linPartition
	for i, r := range results {
		switch r {
		case porcupine.Illegal:
			failed = append(failed, m.parts[i])
		case porcupine.Unknown:
			v.add("timeout", fmt.Sprintf("linearizability check timed out (unknown): %s model, %s %q: %d operations undecided within the model's %v budget; neither shown linearizable nor shown not to be",
				m.name, m.noun, m.parts[i].id, len(m.parts[i].ops), timeout))
		}
	}
	if len(failed) == 0 {
		return
	}
	// Again, verbosely, for the partial linearizations that explain each
	// failure and for the visualisation.
	var all []porcupine.Operation
	for _, p := range failed {
		all = append(all, p.ops...)
	}
	model := m.model
	model.Partition = partitionsOf
	_, info := porcupine.CheckOperationsVerbose(model, all, timeout)
	partials := info.PartialLinearizationsOperations()
	viz := ""
	if outDir != "" {
		path := filepath.Join(outDir, "linearizability-"+m.name+".html")
		if err := porcupine.VisualizePath(model, info, path); err != nil {
			viz = fmt.Sprintf(" (could not write the visualisation: %v)", err)
		} else {
			viz = " (visualisation: " + path + ")"
		}
	}
	for k, p := range failed {
		var prefix []porcupine.Operation
		if k < len(partials) {
			prefix = longestPartial(partials[k])
		}
		bad := firstUnlinearized(p.ops, prefix)
		why, idx := m.explain(h, p.ops, prefix, bad)
		ops := make([]history.Op, len(idx))
		for i, j := range idx {
			ops[i] = h[j]
		}
		v.add("not linearizable", fmt.Sprintf("not linearizable: %s %q (%d operations): %s%s", m.noun, p.id, len(p.ops), why, viz), ops...)
	}
}

// longestPartial picks the longest partial linearization, the first in
// history order among equals so that reports are stable.
func longestPartial(partials [][]porcupine.Operation) []porcupine.Operation {
	var best []porcupine.Operation
	for _, p := range partials {
		if len(p) > len(best) || len(p) == len(best) && len(p) > 0 && lessLinearization(p, best) {
			best = p
		}
	}
	return best
}

func lessLinearization(a, b []porcupine.Operation) bool {
	for i := range a {
		x, y := a[i].Metadata.(linMeta).index, b[i].Metadata.(linMeta).index
		if x != y {
			return x < y
		}
	}
	return false
}

// firstUnlinearized is the operation porcupine could not place: of those
// outside the longest linearizable prefix, the one that completed first
// (it had to be linearized before its completion, and could not be).
func firstUnlinearized(ops, prefix []porcupine.Operation) porcupine.Operation {
	in := map[int]bool{}
	for _, op := range prefix {
		in[op.Metadata.(linMeta).index] = true
	}
	var bad porcupine.Operation
	found := false
	for _, op := range ops {
		if in[op.Metadata.(linMeta).index] {
			continue
		}
		if !found || op.Return < bad.Return {
			bad, found = op, true
		}
	}
	return bad
}

// explainKV says which state the key was in after the longest linearizable
// prefix, and shows the write that made it, the write the failing read
// returned (if any) and the failing operation.
func explainKV(h history.History, part, prefix []porcupine.Operation, bad porcupine.Operation) (string, []int) {
	states := []kvModelState{{}}
	lastWrite := -1
	for _, op := range prefix {
		in, out := op.Input.(kvModelInput), op.Output.(kvModelOutput)
		var next []kvModelState
		for _, s := range states {
			for _, n := range kvStep(s, in, out) {
				if !containsKVState(next, n) {
					next = append(next, n)
				}
			}
		}
		states = next
		if !in.read && out.outcome != history.Stale {
			lastWrite = op.Metadata.(linMeta).index
		}
	}
	desc := make([]string, len(states))
	for i, s := range states {
		desc[i] = describeKVState(s)
	}
	stateText := strings.Join(desc, " or ")
	if len(states) == 0 {
		stateText = "no state"
	}
	badIdx := bad.Metadata.(linMeta).index
	b := h[badIdx]
	var idx []int
	if b.Kind == history.OpRead && b.Outcome == history.OK {
		for i, op := range h {
			if op.Kind == history.OpWrite && op.Key == b.Key && op.Value == b.Value && op.Outcome != history.Stale && op.Outcome != history.Fail && i != lastWrite {
				idx = append(idx, i)
				break
			}
		}
	}
	if lastWrite >= 0 {
		idx = append(idx, lastWrite)
	}
	idx = append(idx, badIdx)
	why := fmt.Sprintf("%s cannot be explained: the longest order found for the operations before it (%d) leaves the key at %s",
		opLabel(b), len(prefix), stateText)
	if lastWrite >= 0 {
		why += fmt.Sprintf(", last written by %s", opLabel(h[lastWrite]))
	}
	if gap := versionGap(states, b); gap != "" && !unplacedUnknownWrite(h, part, prefix, b) {
		why += "; " + gap
	}
	return why, idx
}

// versionGap explains an accepted write or a read whose version is more
// than one above the key's version in every state it may follow: writes
// the history does not show were applied in between. The caller checks
// that no write of unknown outcome can have taken those versions.
func versionGap(states []kvModelState, b history.Op) string {
	if b.Outcome != history.OK || b.Kind != history.OpWrite && b.Kind != history.OpRead || len(states) == 0 {
		return ""
	}
	top := uint64(0)
	for _, s := range states {
		top = max(top, s.version)
	}
	lo, hi := top+1, b.Version // a read's version was written by someone
	if b.Kind == history.OpWrite {
		hi-- // a write's own version is its
	}
	switch {
	case b.Version <= top || lo > hi:
		return ""
	case lo == hi:
		return fmt.Sprintf("no write in the history can have taken version %d in time (a write applied twice, such as a retried request, or a writer the history does not record)", lo)
	}
	return fmt.Sprintf("no write in the history can have taken versions %d to %d in time (a write applied twice, such as a retried request, or a writer the history does not record)", lo, hi)
}

// unplacedUnknownWrite reports whether a write of unknown outcome that
// was invoked before b completed is outside prefix: it might have taken a
// version that looks missing.
func unplacedUnknownWrite(h history.History, part, prefix []porcupine.Operation, b history.Op) bool {
	placed := map[int]bool{}
	for _, op := range prefix {
		placed[op.Metadata.(linMeta).index] = true
	}
	for _, op := range part {
		i := op.Metadata.(linMeta).index
		if w := h[i]; !placed[i] && w.Kind == history.OpWrite && w.Outcome == history.Unknown && w.Invoke <= b.Complete {
			return true
		}
	}
	return false
}

func containsKVState(states []kvModelState, s kvModelState) bool {
	for _, x := range states {
		if x == s {
			return true
		}
	}
	return false
}

// explainLock shows the grant porcupine could not place and the grant
// that rules it out: one that completed before it was invoked with a token
// at least as high, or else the last grant before it in the longest order
// porcupine found.
func explainLock(h history.History, part, prefix []porcupine.Operation, bad porcupine.Operation) (string, []int) {
	badIdx := bad.Metadata.(linMeta).index
	b := h[badIdx]
	before := -1
	for _, op := range part {
		i := op.Metadata.(linMeta).index
		a := h[i]
		if i == badIdx || a.Complete >= b.Invoke || a.Token < b.Token || a.Token == b.Token && a.Session == b.Session {
			continue
		}
		if before < 0 || a.Token > h[before].Token {
			before = i
		}
	}
	if before >= 0 {
		a := h[before]
		return fmt.Sprintf("%s cannot be explained: %s completed %v before it was invoked, so its token had to be above %d",
			opLabel(b), opLabel(a), sinceCompleted(a, b), a.Token), []int{before, badIdx}
	}
	if len(prefix) == 0 {
		return fmt.Sprintf("%s cannot be explained as the lock's first grant", opLabel(b)), []int{badIdx}
	}
	last := prefix[len(prefix)-1].Metadata.(linMeta).index
	return fmt.Sprintf("%s cannot be explained: its token is not above token %d of the grant it must follow (%s)",
		opLabel(b), h[last].Token, opLabel(h[last])), []int{last, badIdx}
}
