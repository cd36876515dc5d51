package checker

import (
	"fmt"
	"sort"
	"time"

	"github.com/fenced-dev/fenced/check/history"
)

// Names of the checkers, as they appear in Violation.Check.
const (
	StaleWriteCheck      = "stale-write"
	TokenOrderCheck      = "token-order"
	MutualExclusionCheck = "mutual-exclusion"
	LinearizabilityCheck = "linearizability"
	LostAckCheck         = "lost-ack"
	LivenessCheck        = "liveness"
	OwnershipCheck       = "ownership"
	ScopeCheck           = "scope"
	SemaphoreCheck       = "semaphore"
	RWExclusionCheck     = "rw-exclusion"
	ElectionCheck        = "election"
	QueueCheck           = "queue"
	LatchCheck           = "latch"
	SignedGrantCheck     = "signed-grant"
)

// DefaultLinearizableTimeout is how long porcupine may search for a
// linearization of one model (kv or locks) when Options leaves
// LinearizableTimeout zero.
const DefaultLinearizableTimeout = 30 * time.Second

// maxViolationsPerRule caps the violations one rule of one checker reports:
// a single fault (a token counter reset by a restart, a kv that accepts
// everything) can break every later operation, and the first few show it.
// The rest are counted in one last violation.
const maxViolationsPerRule = 10

// Options are the settings of the checkers that need more than the
// history. The zero value checks safety only: no visualisation, no liveness.
type Options struct {
	// OutDir is where a linearizability failure writes porcupine's HTML
	// visualisation (linearizability-kv.html, linearizability-lock.html);
	// "" writes none.
	OutDir string
	// HealedAt is when every fault was healed, in Unix nanoseconds; zero
	// skips the liveness check.
	HealedAt int64
	// LivenessBound is how soon after HealedAt every live client must
	// complete an acquire that was granted. Zero means at any time after
	// HealedAt before the history ends.
	LivenessBound time.Duration
	// LiveProcesses are the client processes alive at the end, which must
	// all show they can still get a grant.
	LiveProcesses []string
	// LinearizableTimeout bounds the linearizability search of each model;
	// zero means DefaultLinearizableTimeout. A search that runs out of time
	// is reported as undecided, never as a pass.
	LinearizableTimeout time.Duration
}

// All runs every checker over h and returns their violations in a
// stable order: stale-write, token-order, mutual-exclusion,
// linearizability, lost-ack, liveness, ownership, scope, semaphore,
// rw-exclusion, election, queue, latch, signed-grant; within a checker in the
// order of keys, names and time. An empty result means the history passed.
func All(h history.History, o Options) []Violation {
	var out []Violation
	out = append(out, StaleWrites(h)...)
	out = append(out, TokenOrder(h)...)
	out = append(out, MutualExclusion(h)...)
	out = append(out, Linearizable(h, o)...)
	out = append(out, LostAcks(h)...)
	out = append(out, Liveness(h, o)...)
	out = append(out, Ownership(h)...)
	out = append(out, Scopes(h)...)
	out = append(out, Semaphores(h)...)
	out = append(out, RWExclusion(h)...)
	out = append(out, Elections(h)...)
	out = append(out, Queues(h)...)
	out = append(out, Latches(h)...)
	out = append(out, SignedGrants(h)...)
	return out
}

// violationSet collects the violations of one checker, at most
// maxViolationsPerRule for each of its rules.
type violationSet struct {
	check   string
	out     []Violation
	count   map[string]int
	dropped map[string]int
	rules   []string // in order of first drop, for a stable summary
}

func newViolationSet(check string) *violationSet {
	return &violationSet{check: check, count: map[string]int{}, dropped: map[string]int{}}
}

// add records a violation of rule (a short label such as "version order").
func (v *violationSet) add(rule, msg string, ops ...history.Op) {
	if v.count[rule] >= maxViolationsPerRule {
		if v.dropped[rule] == 0 {
			v.rules = append(v.rules, rule)
		}
		v.dropped[rule]++
		return
	}
	v.count[rule]++
	v.out = append(v.out, Violation{Check: v.check, Message: msg, Ops: append([]history.Op(nil), ops...)})
}

// list returns the violations, ending with one per rule that had more than
// were shown.
func (v *violationSet) list() []Violation {
	for _, rule := range v.rules {
		v.out = append(v.out, Violation{
			Check:   v.check,
			Message: fmt.Sprintf("%d more %s violations not shown (the first %d are listed above)", v.dropped[rule], rule, maxViolationsPerRule),
		})
	}
	return v.out
}

// opLabel names an operation for a violation message, for example
// `p3 write "lock-1" token 7 -> ok version 12`.
func opLabel(op history.Op) string {
	switch op.Kind {
	case history.OpAcquire:
		s := fmt.Sprintf("%s acquire %s -> %s", op.Process, grantObject(op), op.Outcome)
		if op.Outcome == history.OK {
			s += fmt.Sprintf(" token %d session %d", op.Token, op.Session)
		}
		return s
	case history.OpWrite:
		s := fmt.Sprintf("%s write %q token %d value %q -> %s", op.Process, op.Key, op.Token, op.Value, op.Outcome)
		switch op.Outcome {
		case history.OK:
			s += fmt.Sprintf(" version %d", op.Version)
		case history.Stale:
			s += fmt.Sprintf(" (required %d)", op.Required)
		}
		return s
	case history.OpRead:
		s := fmt.Sprintf("%s read %q -> %s", op.Process, op.Key, op.Outcome)
		switch op.Outcome {
		case history.OK:
			s += fmt.Sprintf(" value %q version %d token %d", op.Value, op.Version, op.Token)
		case history.NotFound:
			if op.Token != 0 {
				s += fmt.Sprintf(" (watermark %d)", op.Token)
			}
		}
		return s
	case history.OpServerGrant:
		return fmt.Sprintf("%s@%d grant %s to session %d token %d", op.Process, op.Seq, grantObject(op), op.Session, op.Token)
	case history.OpServerRelease:
		s := fmt.Sprintf("%s@%d release %s by session %d token %d", op.Process, op.Seq, grantObject(op), op.Session, op.Token)
		if op.Result != "" {
			s += " (" + op.Result + ")"
		}
		return s
	case history.OpServerExpire:
		return fmt.Sprintf("%s@%d expire session %d", op.Process, op.Seq, op.Session)
	}
	s := fmt.Sprintf("%s %s -> %s", op.Process, op.Kind, op.Outcome)
	if op.Name != "" {
		s += fmt.Sprintf(" name %q", op.Name)
	}
	if op.Token != 0 {
		s += fmt.Sprintf(" token %d", op.Token)
	}
	return s
}

// sinceCompleted is the time from a's completion to b's invocation, for messages.
func sinceCompleted(a, b history.Op) time.Duration {
	return time.Duration(b.Invoke - a.Complete)
}

// realTimeInversion is an operation b that was invoked after a completed
// although its token is lower than a's.
type realTimeInversion struct{ before, after int }

// realTimeInversions finds, among ops (indices into h), every op whose token is
// below the highest token of an op that completed before it was invoked,
// pairing it with that op. ops are all of one key or one name.
func realTimeInversions(h history.History, ops []int) []realTimeInversion {
	byInvoke := append([]int(nil), ops...)
	sort.SliceStable(byInvoke, func(i, j int) bool { return h[byInvoke[i]].Invoke < h[byInvoke[j]].Invoke })
	byComplete := append([]int(nil), ops...)
	sort.SliceStable(byComplete, func(i, j int) bool { return h[byComplete[i]].Complete < h[byComplete[j]].Complete })
	var out []realTimeInversion
	best, next := -1, 0
	for _, b := range byInvoke {
		for next < len(byComplete) && h[byComplete[next]].Complete < h[b].Invoke {
			if c := byComplete[next]; best < 0 || h[c].Token > h[best].Token {
				best = c
			}
			next++
		}
		if best >= 0 && h[best].Token > h[b].Token {
			out = append(out, realTimeInversion{before: best, after: b})
		}
	}
	return out
}

// nounCount is "1 write", "2 writes".
func nounCount(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// sortedMapKeys returns the keys of m in order.
func sortedMapKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
