package checker

import (
	"testing"

	"github.com/fenced-dev/fenced/check/history"
)

// ckLatchOp is a worker's latch operation on generation gen of latch
// "l-0" of initial count initial.
func ckLatchOp(p string, kind history.Kind, gen, initial uint64, outcome, result string, inv, comp float64) history.Op {
	return history.Op{Process: p, Kind: kind, Name: "l-0", Gen: gen, Initial: initial, Outcome: outcome, Result: result, Invoke: ckMs(inv), Complete: ckMs(comp)}
}

func TestCheckLatches(t *testing.T) {
	create := func(gen, initial uint64, at float64) history.Op {
		return ckLatchOp("p1", history.OpLatchCreate, gen, initial, history.OK, "", at, at+1)
	}
	down := func(p string, gen uint64, outcome, result string, inv, comp float64) history.Op {
		return ckLatchOp(p, history.OpCountDown, gen, 0, outcome, result, inv, comp)
	}
	wait := func(p string, gen, initial uint64, result string, inv, comp float64) history.Op {
		return ckLatchOp(p, history.OpLatchWait, gen, initial, history.OK, result, inv, comp)
	}
	tests := []struct {
		name      string
		h         history.History
		wantCheck string
		wantText  string
	}{
		{
			// Generation 1 (count 2) completes at its second count-down
			// (one of them unknown); a late count-down is already
			// complete; generation 2 replaces it and its wait is
			// released as replaced.
			name: "released at zero",
			h: history.History{
				create(1, 2, 0), wait("p1", 1, 2, "completed", 2, 40),
				down("p2", 1, history.Unknown, "", 10, 15), down("p3", 1, history.OK, "completed", 20, 25),
				down("p2", 1, history.OK, "already_complete", 50, 51),
				create(2, 3, 60), wait("p1", 2, 3, "replaced", 62, 70),
			},
		},
		{
			name: "wait released early",
			h: history.History{
				create(1, 2, 0), down("p2", 1, history.OK, "counted", 10, 11), wait("p1", 1, 2, "completed", 2, 15),
				down("p3", 1, history.OK, "completed", 20, 21),
			},
			wantCheck: LatchCheck, wantText: `a wait on generation 1 of latch "l-0" (count 2) was released as completed when only 1 count-down of that generation had been sent`,
		},
		{
			name:      "count-down completed early",
			h:         history.History{create(1, 3, 0), down("p2", 1, history.OK, "counted", 10, 11), down("p3", 1, history.OK, "completed", 20, 21)},
			wantCheck: LatchCheck, wantText: `a count-down of generation 1 of latch "l-0" (count 3) completed it when only 2 count-downs of that generation had been sent`,
		},
		{
			// Count-downs of generation 1 and a refused one do not
			// count for generation 2.
			name: "count-downs of another generation",
			h: history.History{
				create(1, 2, 0), down("p2", 1, history.OK, "counted", 10, 11),
				create(2, 2, 20), down("p2", 2, history.Fail, "stale_generation", 22, 23),
				down("p3", 1, history.Fail, "stale_generation", 24, 25), down("p3", 2, history.OK, "completed", 30, 31),
			},
			wantCheck: LatchCheck, wantText: "completed it when only 1 count-down of that generation had been sent",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ckWant(t, Latches(tt.h.Sorted()), tt.wantCheck, tt.wantText)
		})
	}
}
