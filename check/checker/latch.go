package checker

import (
	"fmt"

	"github.com/fenced-dev/fenced/check/history"
)

// latchGen names one generation of one latch.
type latchGen struct {
	name string
	gen  uint64
}

// Latches checks the countdown latch's promise (docs/latch.md): a
// generation completes exactly at zero of its own count. For each
// generation of initial count N (as a create, join or count-down
// reported it):
//
//   - a wait on it answered "completed" must have completed after at
//     least N count-downs of that generation were sent ("early release");
//   - a count-down answered "completed" must have completed after at
//     least N count-downs of that generation (itself included) were sent
//     ("early completion").
//
// A count-down counts as sent from its invocation whatever its answer but
// a definite refusal, so that the rule never blames the cluster for a
// count-down it may have applied. Violations have Check "latch".
func Latches(h history.History) []Violation {
	v := newViolationSet(LatchCheck)
	initial := map[latchGen]uint64{}
	var downs = map[latchGen][]int64{} // invocation times of the count-downs that may have counted
	for _, op := range h {
		k := latchGen{op.Name, op.Gen}
		switch op.Kind {
		case history.OpLatchCreate, history.OpCountDown, history.OpLatchWait:
		default:
			continue
		}
		if op.Gen != 0 && op.Initial != 0 && (op.Kind != history.OpLatchCreate || op.Outcome == history.OK) {
			initial[k] = op.Initial
		}
		if op.Kind == history.OpCountDown && op.Outcome != history.Fail && op.Result != "already_complete" {
			downs[k] = append(downs[k], op.Invoke)
		}
	}
	sent := func(k latchGen, by int64) uint64 {
		n := uint64(0)
		for _, t := range downs[k] {
			if t <= by {
				n++
			}
		}
		return n
	}
	for _, op := range h {
		k := latchGen{op.Name, op.Gen}
		n, known := initial[k]
		if !known || op.Outcome != history.OK || op.Result != "completed" {
			continue
		}
		switch op.Kind {
		case history.OpLatchWait:
			if s := sent(k, op.Complete); s < n {
				v.add("early release", fmt.Sprintf("a wait on generation %d of latch %q (count %d) was released as completed when only %s of that generation had been sent: %s",
					op.Gen, op.Name, n, nounCount(int(s), "count-down"), opLabel(op)), op)
			}
		case history.OpCountDown:
			if s := sent(k, op.Complete); s < n {
				v.add("early completion", fmt.Sprintf("a count-down of generation %d of latch %q (count %d) completed it when only %s of that generation had been sent: %s",
					op.Gen, op.Name, n, nounCount(int(s), "count-down"), opLabel(op)), op)
			}
		}
	}
	return v.list()
}
