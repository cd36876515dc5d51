package report

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/fenced-dev/fenced/check/checker"
	"github.com/fenced-dev/fenced/check/history"
)

// The timeline of report.html is one inline SVG: time runs left to right,
// one lane per client process, per server node and for the nemesis. It is
// drawn by hand into a strings.Builder (html/template would escape every one
// of tens of thousands of elements through its contextual machinery); every
// piece of text goes through esc, so the SVG is well-formed XML.

// Geometry, in CSS pixels.
const (
	tlPad      = 24.0    // margin left of the time range
	tlPadR     = 110.0   // margin right of it, for the labels of late marks
	tlAxisH    = 30.0    // height of the time axis above and below the lanes
	tlLaneH    = 52.0    // height of a client or server lane
	tlGroupGap = 10.0    // gap between the clients, the servers and the nemesis
	tlScreenW  = 1260.0  // a short run is stretched to this width
	tlMinPxSec = 40.0    // a long run gets at least this many pixels a second...
	tlOpPx     = 6.0     // ...or this many for each op of an average client lane...
	tlMaxW     = 60000.0 // ...unless the canvas would get wider than this
	tlBucket   = 2.0     // routine marks closer than this are drawn as one
	tlNemRowH  = 22.0    // height of a row of fault bars in the nemesis lane
	tlCharW    = 6.4     // rough width of a character of the 11px font
)

// Colours. Red and green are kept for writes; lock colours are dark enough
// for white labels.
const (
	tlColOK      = "#2e9e44"
	tlColStale   = "#e00000"
	tlColRead    = "#4a4a4a"
	tlColFail    = "#9a9a9a"
	tlColViolate = "#d00000"
	tlColGrid    = "#e6e6e6"
	tlColExpire  = "#c0561a"
)

var palette = []string{
	"#3b6fb6", "#7b4fb0", "#b5651d", "#2a8c8c", "#a0527a",
	"#5b7a2e", "#4a5a8c", "#8c6d1f", "#1f6f5a", "#6d4c41",
}

// laneKind is what a lane shows: a client process, a server node or the
// nemesis.
type laneKind int

const (
	laneClient laneKind = iota
	laneNode
	laneNemesis
)

// lane is one row of the timeline, at y, h high.
type lane struct {
	name string
	kind laneKind
	y, h float64
}

// grantSpan is one grant as its holder saw it.
type grantSpan struct {
	proc, name     string
	token, session uint64
	acquire        history.Op
	start, end     int64
	lostFrom       int64 // when the holder stopped renewing (expire), or 0
	how            string
	// goneAt is the first sign that the grant was over on the servers while
	// its holder still had it: a server expired its session or granted the
	// name to another session, or another client got the name. 0 if none.
	goneAt  int64
	goneWhy string
}

// faultSpan is one fault, from its start to its heal.
type faultSpan struct {
	fault, target string
	start, end    int64
	healed        bool
	startErr      string
	healErr       string
	lanes         []*lane
	row           int
}

// timeline is the laid-out run that render draws.
type timeline struct {
	ops           history.History // sorted
	t0, t1        int64
	pxPerSec      float64
	width, height float64
	lanes         []*lane
	byName        map[string]*lane
	nemesis       *lane
	lockColor     map[string]string
	lockNames     []string
	grants        []grantSpan
	faults        []faultSpan
	faultKinds    []string
	marked        map[history.Op][]int // op -> numbers (1-based) of its violations
	violations    []checker.Violation
	violationX    []float64 // x of each violation's earliest op, or -1
	b             strings.Builder
}

// newTimeline lays out h: lanes, scale, grants and faults.
func newTimeline(h history.History, violations []checker.Violation) *timeline {
	t := &timeline{
		ops:        h.Sorted(),
		byName:     map[string]*lane{},
		lockColor:  map[string]string{},
		marked:     map[history.Op][]int{},
		violations: violations,
	}
	all := append(history.History(nil), t.ops...)
	for i, v := range violations {
		for _, op := range v.Ops {
			t.marked[op] = append(t.marked[op], i+1)
			all = append(all, op)
		}
	}
	t.t0, t.t1 = bounds(all)
	if t.t1 <= t.t0 {
		t.t1 = t.t0 + int64(time.Second)
	}
	dur := float64(t.t1-t.t0) / 1e9
	// Enough room for the ops of a busy lane: about tlOpPx pixels apart.
	clientOps, clientLanes := 0, map[string]bool{}
	for _, op := range t.ops {
		if isClientOp(op) {
			clientOps++
			clientLanes[op.Process] = true
		}
	}
	want := tlMinPxSec
	if len(clientLanes) > 0 {
		want = math.Max(want, tlOpPx*float64(clientOps)/float64(len(clientLanes))/dur)
	}
	t.pxPerSec = math.Max(tlScreenW/dur, math.Min(want, tlMaxW/dur))
	t.width = tlPad + tlPadR + dur*t.pxPerSec

	t.layoutLanes(all)
	t.findGrants()
	t.findFaults()
	t.placeLanes()
	t.violationX = make([]float64, len(violations))
	for i, v := range violations {
		t.violationX[i] = -1
		for _, op := range v.Ops {
			if x := t.x(op.Invoke); t.violationX[i] < 0 || x < t.violationX[i] {
				t.violationX[i] = x
			}
		}
	}
	return t
}

// x maps a Unix-nanosecond time to the canvas.
func (t *timeline) x(ns int64) float64 {
	if ns == 0 {
		ns = t.t0
	}
	return tlPad + float64(ns-t.t0)/1e9*t.pxPerSec
}

// span returns an op's x extent; an op that never completed runs to the end.
func (t *timeline) span(op history.Op) (x1, x2 float64) {
	end := op.Complete
	if end < op.Invoke {
		end = t.t1
	}
	return t.x(op.Invoke), t.x(end)
}

func (t *timeline) rel(ns int64) string { return relTime(ns - t.t0) }

// render writes the whole SVG.
func (t *timeline) render() string {
	b := &t.b
	fmt.Fprintf(b, `<svg id="timeline" xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif" font-size="11">`,
		t.width, t.height, t.width, t.height)
	t.lanesBackground()
	t.grid()
	t.violationLines()
	t.faultShading()
	t.grantBars()
	t.clientOps()
	t.serverEvents()
	t.nemesisLane()
	t.staleWrites()
	t.violationMarks()
	b.WriteString(`</svg>`)
	return b.String()
}
