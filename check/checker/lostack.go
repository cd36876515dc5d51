package checker

import (
	"fmt"

	"github.com/fenced-dev/fenced/check/history"
)

// LostAcks checks that no acknowledged write was lost: for every key
// with accepted writes (Kind write, Outcome OK), the final read of the key
// (process "final", the last one if there are several) must show a
// watermark at least the highest token of those writes, a version at least
// the highest version acknowledged and, at that version, the value that
// write stored. The workload never deletes, so a key with acknowledged
// writes that reads as not found lost them. A key with acknowledged writes
// and no final read that answered is reported too: the harness could not
// verify it.
//
// Violations have Check "lost-ack".
func LostAcks(h history.History) []Violation {
	v := newViolationSet(LostAckCheck)
	type acked struct {
		n                    int
		maxToken, maxVersion history.Op
	}
	keys := map[string]*acked{}
	finals := map[string]history.Op{}
	for _, op := range h {
		switch {
		case op.Kind == history.OpWrite && op.Outcome == history.OK:
			a := keys[op.Key]
			if a == nil {
				a = &acked{maxToken: op, maxVersion: op}
				keys[op.Key] = a
			}
			a.n++
			if op.Token > a.maxToken.Token {
				a.maxToken = op
			}
			if op.Version > a.maxVersion.Version {
				a.maxVersion = op
			}
		case op.Kind == history.OpRead && op.Process == history.FinalProcess:
			if f, ok := finals[op.Key]; !ok || finalReadBetter(op, f) {
				finals[op.Key] = op
			}
		}
	}
	for _, key := range sortedMapKeys(keys) {
		a := keys[key]
		f, ok := finals[key]
		switch {
		case !ok:
			v.add("no final read", fmt.Sprintf("key %q has %s (up to version %d) but the harness never read it at the end, so none could be verified",
				key, nounCount(a.n, "acknowledged write"), a.maxVersion.Version), a.maxVersion)
		case f.Outcome != history.OK && f.Outcome != history.NotFound:
			v.add("no final read", fmt.Sprintf("key %q has %s (up to version %d) but its final read did not answer (%s: %s), so none could be verified",
				key, nounCount(a.n, "acknowledged write"), a.maxVersion.Version, f.Outcome, f.Error), a.maxVersion, f)
		case f.Outcome == history.NotFound:
			v.add("lost write", fmt.Sprintf("key %q: the final read found no key, but it had %s, the last as version %d with token %d",
				key, nounCount(a.n, "acknowledged write"), a.maxVersion.Version, a.maxVersion.Token), a.maxVersion, f)
		default:
			if f.Token < a.maxToken.Token {
				v.add("lost write", fmt.Sprintf("key %q: the final read shows watermark %d, below token %d of an acknowledged write (%s)",
					key, f.Token, a.maxToken.Token, opLabel(a.maxToken)), a.maxToken, f)
			}
			if f.Version < a.maxVersion.Version {
				v.add("lost write", fmt.Sprintf("key %q: the final read shows version %d, below acknowledged version %d (%s)",
					key, f.Version, a.maxVersion.Version, opLabel(a.maxVersion)), a.maxVersion, f)
			} else if f.Version == a.maxVersion.Version && f.Value != a.maxVersion.Value {
				v.add("lost write", fmt.Sprintf("key %q: the final read shows value %q at version %d, but the write acknowledged as version %d stored %q",
					key, f.Value, f.Version, a.maxVersion.Version, a.maxVersion.Value), a.maxVersion, f)
			}
		}
	}
	return v.list()
}

// finalReadBetter reports whether final read a should be used rather than
// b: one that answered beats one that did not, then the later one.
func finalReadBetter(a, b history.Op) bool {
	answered := func(op history.Op) bool { return op.Outcome == history.OK || op.Outcome == history.NotFound }
	if answered(a) != answered(b) {
		return answered(a)
	}
	return a.Complete >= b.Complete
}
