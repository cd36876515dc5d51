// Package gcfloor keeps the Go collector from running often while the live
// heap is small.
//
// With GOGC at its default of 100 the collector starts a new cycle once the
// heap has grown by as much as was live after the last one. A fenced server
// under load with few sessions holds about 10 MiB live and allocates
// garbage with every call, so it collects several times a second, and each
// cycle's marking (and the assists and write barriers it brings) takes
// CPU from the calls. Start sets GOGC after every collection so that the
// next one starts at about the floor instead, and at twice the live heap
// (GOGC 100) once the live heap is about half the floor or more: the memory a
// large server needs is unchanged, a small one uses up to about the floor.
//
// GOMEMLIMIT, when set, still bounds the heap: the runtime collects before
// the limit whatever GOGC says.
package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// minLive is the live heap the percent is computed from when less is
// live: the runtime's own smallest heap goal at GOGC 100 is 4 MiB, and
// before the first collection the goal is 4 MiB × GOGC/100, so the floor
// holds from the start and a nearly empty heap does not ask for an
// unbounded GOGC.
const minLive = 4 << 20

// The runtime's figures of the last collection: the live heap after its
// marking, and the stacks and globals it scanned. The next heap goal is
// live + (live + stacks + globals) × GOGC/100.
const (
	liveMetric    = "/gc/heap/live:bytes"
	stacksMetric  = "/gc/scan/stack:bytes"
	globalsMetric = "/gc/scan/globals:bytes"
)

// Percent is the GOGC that makes the next heap goal about floor bytes,
// after a collection that found live bytes of heap live and scanned roots
// bytes of stacks and globals, and never less than 100: the goal is
// live + (live + roots) × GOGC/100.
func Percent(live, roots, floor uint64) int {
	live = max(live, minLive)
	if floor <= 2*live+roots {
		return 100
	}
	return int((floor - live) * 100 / (live + roots))
}

// tuner sets GOGC after each collection, from a finalizer that each run
// arms again for the next collection.
type tuner struct {
	floor uint64

	mu      sync.Mutex
	stopped bool
	last    int
	sample  []metrics.Sample
}

// sentinel is allocated only to be collected: its finalizer runs once
// after the collection that found it unreachable. It holds a pointer so
// that it is not a tiny allocation, which may never be collected alone.
type sentinel struct{ _ *byte }

// Start sets GOGC now and after every collection so that the heap goal is
// about floor bytes or twice the live heap, whichever is more. It returns
// a function that stops the tuning and puts GOGC back to 100. A floor of 0
// changes nothing.
func Start(floor uint64) (stop func()) {
	if floor == 0 {
		return func() {}
	}
	t := &tuner{floor: floor, last: 100, sample: []metrics.Sample{{Name: liveMetric}, {Name: stacksMetric}, {Name: globalsMetric}}}
	t.tune()
	t.arm()
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if !t.stopped {
			t.stopped = true
			debug.SetGCPercent(100)
		}
	}
}

func (t *tuner) arm() {
	runtime.SetFinalizer(&sentinel{}, func(*sentinel) {
		if t.tune() {
			t.arm()
		}
	})
}

// tune sets GOGC for the live heap of the last collection, when it differs
// from the percent set before, and reports whether the tuning goes on.
func (t *tuner) tune() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	metrics.Read(t.sample)
	var v [3]uint64
	for i, s := range t.sample {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	if p := Percent(v[0], v[1]+v[2], t.floor); p != t.last {
		t.last = p
		debug.SetGCPercent(p)
	}
	return true
}
