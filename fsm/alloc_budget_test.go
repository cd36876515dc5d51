package fsm_test

import (
	"runtime"
	"testing"

	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// Allocation budgets of the hot path (hotpath_bench_test.go): how many
// heap allocations each step of a lock cycle may make. An allocation is
// counted, not timed, so the budgets hold on a loaded machine and under
// the race detector (which allocates the same here). Each budget is the
// count measured when it was set, plus a margin of about 1% where the
// count is large; a change that allocates more fails here.
//
// To update a budget (after a change that needs more, or one that cuts
// allocations, so the budget keeps catching regressions): run
//
//	go test -run X -bench HotPath -benchmem ./fsm/
//
// and set the budget to the new allocs/op, saying why in the commit
// (docs/contributing.md, "Allocation budgets").
var allocBudgets = map[string]float64{
	"encode acquire":           1,   // the entry's buffer
	"encode batch of 64":       1,   // the entry's buffer
	"decode acquire":           7,   // entry and slice, op, Acquire, name, Quota, owner, hash
	"decode batch of 64":       390, // 386: 6 per command, the array, the slice
	"apply acquire":            0,   // a dropped lock is reused
	"apply release":            0,   //
	"keep-alive check of 64":   0,   // CheckOwner per session
	"cycle":                    16,  // encode 1 + decode 7, twice
	"64 cycles in two entries": 780, // 774
}

// checkBudget fails t when got allocations exceed the budget of step.
func checkBudget(t *testing.T, step string, got float64) {
	t.Helper()
	budget, ok := allocBudgets[step]
	if !ok {
		t.Fatalf("no allocation budget for %q", step)
	}
	if got > budget {
		t.Errorf("%s: %.1f allocations, budget %.0f (see allocBudgets to update it)", step, got, budget)
	} else {
		t.Logf("%s: %.1f allocations, budget %.0f", step, got, budget)
	}
}

// allocsPerStep is testing.AllocsPerRun for a step that needs a setup
// before each run which is not counted: the average allocations of step
// over runs, after one run to warm up.
func allocsPerStep(runs int, setup, step func()) float64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	setup()
	step()
	var before, after runtime.MemStats
	var total uint64
	for range runs {
		setup()
		runtime.ReadMemStats(&before)
		step()
		runtime.ReadMemStats(&after)
		total += after.Mallocs - before.Mallocs
	}
	return float64(total) / float64(runs)
}

func TestAllocBudget_Encode(t *testing.T) {
	h := newHotPath(t, hotBatch)
	checkBudget(t, "encode acquire", testing.AllocsPerRun(100, func() { encode(t, h.acquires[0]) }))
	checkBudget(t, "encode batch of 64", testing.AllocsPerRun(20, func() { encode(t, h.acquires...) }))
}

func TestAllocBudget_Decode(t *testing.T) {
	h := newHotPath(t, hotBatch)
	one, batch := encode(t, h.acquires[0]), encode(t, h.acquires...)
	checkBudget(t, "decode acquire", testing.AllocsPerRun(100, func() { decode(t, one) }))
	checkBudget(t, "decode batch of 64", testing.AllocsPerRun(20, func() { decode(t, batch) }))
}

func TestAllocBudget_Apply(t *testing.T) {
	h := newHotPath(t, 1)
	cycle, held := uint64(0), false
	acquire := func() {
		cycle++
		h.next(0, cycle)
		h.apply(t, h.acquires[0])
		held = true
	}
	release := func() {
		h.apply(t, h.releases[0])
		held = false
	}
	// Warm up: a session's replies grow to replyWindow before they are
	// reused, and the budgets are of the steady state.
	for range 100 {
		acquire()
		release()
	}
	checkBudget(t, "apply acquire", allocsPerStep(100, func() {
		if held {
			release()
		}
	}, acquire))
	checkBudget(t, "apply release", allocsPerStep(100, func() {
		if !held {
			acquire()
		}
	}, release))
}

func TestAllocBudget_KeepAlive(t *testing.T) {
	h := newHotPath(t, hotBatch)
	checkBudget(t, "keep-alive check of 64", testing.AllocsPerRun(100, func() { h.checkOwners(t) }))
}

func TestAllocBudget_Cycle(t *testing.T) {
	h := newHotPath(t, hotBatch)
	cycle := uint64(0)
	one := func() {
		cycle++
		h.next(0, cycle)
		h.cycle(t, h.acquires[:1], h.releases[:1])
	}
	all := func() {
		cycle++
		for s := range hotBatch {
			h.next(s, cycle)
		}
		h.cycle(t, h.acquires, h.releases)
	}
	for range 100 { // warm up, as in TestAllocBudget_Apply
		all()
	}
	checkBudget(t, "cycle", testing.AllocsPerRun(100, one))
	checkBudget(t, "64 cycles in two entries", testing.AllocsPerRun(20, all))
}

// The budgets are checked against commands as the server proposes them;
// a fixture that lost its quota or secret would measure less and pass
// budgets a real cycle breaks.
func TestAllocBudget_FixtureIsTheServersCommand(t *testing.T) {
	h := newHotPath(t, 1)
	a := h.acquires[0].GetAcquire()
	if a.GetQuota().GetOwner() == "" || len(a.GetSecretHash()) == 0 || !a.GetWait() || h.acquires[0].GetNowUnixMs() == 0 {
		t.Fatalf("the acquire of the budgets is not one the server proposes: %v", h.acquires[0])
	}
	if _, ok := h.releases[0].GetOp().(*statev1.Command_Release); !ok || h.releases[0].GetRelease().GetQuota() == nil {
		t.Fatalf("the release of the budgets is not one the server proposes: %v", h.releases[0])
	}
}
