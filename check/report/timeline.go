package report

import (
	"fmt"
	"html/template"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fenced-dev/fenced/check/checker"
	"github.com/fenced-dev/fenced/check/history"
)

// The timeline of report.html is one inline SVG: time runs left to right,
// one lane per client process, per server node and for the nemesis. It is
// drawn by hand into a strings.Builder (html/template would escape every one
// of tens of thousands of elements through its contextual machinery); every
// piece of text goes through repEsc, so the SVG is well-formed XML.

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

var tlPalette = []string{
	"#3b6fb6", "#7b4fb0", "#b5651d", "#2a8c8c", "#a0527a",
	"#5b7a2e", "#4a5a8c", "#8c6d1f", "#1f6f5a", "#6d4c41",
}

// faultStyle is how a fault kind is drawn.
type tlFaultStyle struct {
	color  string // fill of its spans and markers
	text   string // colour of its labels
	label  string // what the shading on an affected lane says
	marker bool   // drawn as a marker at its start instead of a span
}

var tlFaultStyles = map[string]tlFaultStyle{
	history.FaultPauseClient: {"#f2c230", "#7a5c00", "paused (SIGSTOP)", false},
	history.FaultPauseServer: {"#f08a24", "#8a4300", "paused (SIGSTOP)", false},
	history.FaultKill:        {"#6b6b6b", "#333333", "killed", false},
	history.FaultPartition:   {"#3d9be0", "#0d4f80", "partitioned", false},
	history.FaultSkew:        {"#b07cd8", "#5b2d80", "clock skewed", false},
	history.FaultTransfer:    {"#1f9e8f", "#0b5c53", "leadership transfer", true},
	history.FaultMembership:  {"#7d8a96", "#3c4650", "membership change", true},
}

func tlStyleOf(fault string) tlFaultStyle {
	if st, ok := tlFaultStyles[fault]; ok {
		return st
	}
	return tlFaultStyle{"#a0a0a0", "#444444", fault, false}
}

type tlLaneKind int

const (
	tlClient tlLaneKind = iota
	tlNode
	tlNemesis
)

type tlLane struct {
	name string
	kind tlLaneKind
	y, h float64
}

// grantSpan is one grant as its holder saw it.
type tlGrant struct {
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
type tlFault struct {
	fault, target string
	start, end    int64
	healed        bool
	startErr      string
	healErr       string
	lanes         []*tlLane
	row           int
}

type repTimeline struct {
	ops           history.History // sorted
	t0, t1        int64
	pxPerSec      float64
	width, height float64
	lanes         []*tlLane
	byName        map[string]*tlLane
	nemesis       *tlLane
	lockColor     map[string]string
	lockNames     []string
	grants        []tlGrant
	faults        []tlFault
	faultKinds    []string
	marked        map[history.Op][]int // op -> numbers (1-based) of its violations
	violations    []checker.Violation
	violationX    []float64 // x of each violation's earliest op, or -1
	b             strings.Builder
}

var (
	tlNodeRE   = regexp.MustCompile(`^n[0-9]+$`)
	tlClientRE = regexp.MustCompile(`^p[0-9]+$`)
	tlLaneTok  = regexp.MustCompile(`[A-Za-z]+[0-9]+`)
)

// newTimeline lays out h: lanes, scale, grants and faults.
func newRepTimeline(h history.History, violations []checker.Violation) *repTimeline {
	t := &repTimeline{
		ops:        h.Sorted(),
		byName:     map[string]*tlLane{},
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
	t.t0, t.t1 = repBounds(all)
	if t.t1 <= t.t0 {
		t.t1 = t.t0 + int64(time.Second)
	}
	dur := float64(t.t1-t.t0) / 1e9
	// Enough room for the ops of a busy lane: about tlOpPx pixels apart.
	clientOps, clientLanes := 0, map[string]bool{}
	for _, op := range t.ops {
		if repIsClientOp(op) {
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
func (t *repTimeline) x(ns int64) float64 {
	if ns == 0 {
		ns = t.t0
	}
	return tlPad + float64(ns-t.t0)/1e9*t.pxPerSec
}

// span returns an op's x extent; an op that never completed runs to the end.
func (t *repTimeline) span(op history.Op) (x1, x2 float64) {
	end := op.Complete
	if end < op.Invoke {
		end = t.t1
	}
	return t.x(op.Invoke), t.x(end)
}

func (t *repTimeline) rel(ns int64) string { return repRel(ns - t.t0) }

// layoutLanes creates the lanes: clients (p1, p2, ... then any other
// process), nodes, the nemesis.
func (t *repTimeline) layoutLanes(all history.History) {
	seen := map[string]bool{}
	var clients, others, nodes []string
	add := func(name string) {
		if name == "" || seen[name] || name == history.NemesisProcess {
			return
		}
		seen[name] = true
		switch {
		case tlNodeRE.MatchString(name):
			nodes = append(nodes, name)
		case tlClientRE.MatchString(name):
			clients = append(clients, name)
		default:
			others = append(others, name)
		}
	}
	hasNemesis := false
	for _, op := range all {
		if op.Kind == history.OpFault || op.Process == history.NemesisProcess {
			hasNemesis = true
			for _, tok := range tlLaneTok.FindAllString(op.Target, -1) {
				if tlNodeRE.MatchString(tok) || tlClientRE.MatchString(tok) {
					add(tok)
				}
			}
			continue
		}
		add(op.Process)
		if op.Kind == history.OpAcquire && op.Name != "" {
			if _, ok := t.lockColor[op.Name]; !ok {
				t.lockColor[op.Name] = ""
				t.lockNames = append(t.lockNames, op.Name)
			}
		}
	}
	sort.Slice(clients, func(i, j int) bool { return tlLaneLess(clients[i], clients[j]) })
	sort.Slice(nodes, func(i, j int) bool { return tlLaneLess(nodes[i], nodes[j]) })
	sort.Strings(others)
	sort.Slice(t.lockNames, func(i, j int) bool { return tlLaneLess(t.lockNames[i], t.lockNames[j]) })
	for i, n := range t.lockNames {
		t.lockColor[n] = tlPalette[i%len(tlPalette)]
	}
	for _, n := range append(clients, others...) {
		t.addLane(n, tlClient)
	}
	for _, n := range nodes {
		t.addLane(n, tlNode)
	}
	if hasNemesis || len(t.lanes) == 0 {
		t.nemesis = t.addLane(history.NemesisProcess, tlNemesis)
	}
}

func (t *repTimeline) addLane(name string, k tlLaneKind) *tlLane {
	l := &tlLane{name: name, kind: k, h: tlLaneH}
	t.lanes = append(t.lanes, l)
	t.byName[name] = l
	return l
}

// placeLanes gives every lane its y, once the nemesis lane knows its rows.
func (t *repTimeline) placeLanes() {
	y := tlAxisH
	for i, l := range t.lanes {
		if i > 0 && l.kind != t.lanes[i-1].kind {
			y += tlGroupGap
		}
		l.y = y
		y += l.h
	}
	t.height = y + tlAxisH
}

// laneLess orders names such as p2 before p10.
func tlLaneLess(a, b string) bool {
	pa, na := tlSplitNum(a)
	pb, nb := tlSplitNum(b)
	if pa != pb {
		return pa < pb
	}
	if na != nb {
		return na < nb
	}
	return a < b
}

func tlSplitNum(s string) (string, int) {
	i := len(s)
	for i > 0 && s[i-1] >= '0' && s[i-1] <= '9' {
		i--
	}
	n, err := strconv.Atoi(s[i:])
	if err != nil {
		return s, -1
	}
	return s[:i], n
}

// findGrants turns each OK acquire into a bar that lasts until the same
// process releases the name or lets it expire, or until the end.
func (t *repTimeline) findGrants() {
	open := map[[2]string]int{} // process, name -> index in t.grants
	closeAt := func(i int, end int64, how string) {
		g := &t.grants[i]
		g.end, g.how = max(end, g.start), how
	}
	for _, op := range t.ops {
		if !repIsClientOp(op) || op.Name == "" {
			continue
		}
		k := [2]string{op.Process, op.Name}
		switch op.Kind {
		case history.OpAcquire:
			if op.Outcome != history.OK {
				continue
			}
			if i, ok := open[k]; ok {
				closeAt(i, op.Invoke, "acquired again at "+t.rel(op.Invoke))
			}
			start := max(op.Complete, op.Invoke)
			t.grants = append(t.grants, tlGrant{proc: op.Process, name: op.Name, token: op.Token,
				session: op.Session, acquire: op, start: start})
			open[k] = len(t.grants) - 1
		case history.OpRelease:
			i, ok := open[k]
			if !ok {
				continue
			}
			how := "released at " + t.rel(max(op.Complete, op.Invoke))
			if r := tlJoinResult(op.Result, op.Outcome); r != "" {
				how += " (" + r + ")"
			}
			closeAt(i, max(op.Complete, op.Invoke), how)
			delete(open, k)
		case history.OpExpire:
			i, ok := open[k]
			if !ok {
				continue
			}
			end := max(op.Complete, op.Invoke)
			t.grants[i].lostFrom = max(op.Invoke, t.grants[i].start)
			closeAt(i, end, fmt.Sprintf("stopped renewing at %s, SDK reported it lost at %s", t.rel(op.Invoke), t.rel(end)))
			delete(open, k)
		}
	}
	for _, i := range open {
		closeAt(i, t.t1, "still held at the end of the history")
	}
	t.findGone()
}

// findGone sets goneAt of every grant whose holder kept it after the
// servers were done with it: the window a fencing token exists for.
func (t *repTimeline) findGone() {
	type ev struct {
		at      int64
		session uint64
		proc    string
		why     string
	}
	others := map[string][]ev{}  // name -> grants to anyone, by time
	expires := map[uint64][]ev{} // session -> server expiries, by time
	for _, op := range t.ops {
		switch {
		case op.Kind == history.OpServerGrant:
			others[op.Name] = append(others[op.Name], ev{op.Invoke, op.Session, op.Process,
				fmt.Sprintf("%s granted %s to session %d (token %d)", op.Process, op.Name, op.Session, op.Token)})
		case op.Kind == history.OpServerExpire && op.Session != 0:
			expires[op.Session] = append(expires[op.Session], ev{op.Invoke, op.Session, op.Process,
				fmt.Sprintf("%s expired session %d", op.Process, op.Session)})
		case op.Kind == history.OpAcquire && op.Outcome == history.OK && repIsClientOp(op):
			at := max(op.Complete, op.Invoke)
			others[op.Name] = append(others[op.Name], ev{at, op.Session, op.Process,
				fmt.Sprintf("%s was granted %s with token %d", op.Process, op.Name, op.Token)})
		}
	}
	for _, evs := range others {
		sort.SliceStable(evs, func(i, j int) bool { return evs[i].at < evs[j].at })
	}
	for _, evs := range expires {
		sort.SliceStable(evs, func(i, j int) bool { return evs[i].at < evs[j].at })
	}
	first := func(evs []ev, g *tlGrant, skip func(ev) bool) (ev, bool) {
		i := sort.Search(len(evs), func(i int) bool { return evs[i].at > g.start })
		for ; i < len(evs) && evs[i].at < g.end; i++ {
			if !skip(evs[i]) {
				return evs[i], true
			}
		}
		return ev{}, false
	}
	for i := range t.grants {
		g := &t.grants[i]
		e, ok := first(others[g.name], g, func(e ev) bool {
			return e.proc == g.proc || (g.session != 0 && e.session == g.session)
		})
		if g.session != 0 {
			if x, xok := first(expires[g.session], g, func(ev) bool { return false }); xok && (!ok || x.at < e.at) {
				e, ok = x, true
			}
		}
		if ok {
			g.goneAt, g.goneWhy = e.at, e.why
		}
	}
}

func tlJoinResult(result, outcome string) string {
	switch {
	case result != "" && outcome != "" && outcome != history.OK:
		return result + ", " + outcome
	case result != "":
		return result
	case outcome != history.OK:
		return outcome
	}
	return ""
}

// findFaults pairs each fault's start with its heal (same Fault and Target;
// Fault "all" heals everything still open) and lays the spans out in rows of
// the nemesis lane.
func (t *repTimeline) findFaults() {
	type key struct{ fault, target string }
	open := map[key][]int{}
	kinds := map[string]bool{}
	for _, op := range t.ops {
		if op.Kind != history.OpFault {
			continue
		}
		k := key{op.Fault, op.Target}
		switch {
		case op.Outcome == "start":
			t.faults = append(t.faults, tlFault{fault: op.Fault, target: op.Target,
				start: op.Invoke, end: t.t1, startErr: op.Error})
			open[k] = append(open[k], len(t.faults)-1)
			kinds[op.Fault] = true
		case op.Outcome == "healed" && (op.Fault == "all" || op.Fault == ""):
			for kk, idx := range open {
				for _, i := range idx {
					t.faults[i].end, t.faults[i].healed = op.Invoke, true
				}
				delete(open, kk)
			}
		case op.Outcome == "healed" && len(open[k]) > 0:
			i := open[k][0]
			open[k] = open[k][1:]
			t.faults[i].end, t.faults[i].healed, t.faults[i].healErr = op.Invoke, true, op.Error
		default:
			// A heal without a start, or an outcome we do not know: a marker.
			t.faults = append(t.faults, tlFault{fault: op.Fault, target: op.Target,
				start: op.Invoke, end: op.Invoke, healed: true, startErr: repJoin("; ", op.Outcome, op.Error)})
			kinds[op.Fault] = true
		}
	}
	for k := range kinds {
		t.faultKinds = append(t.faultKinds, k)
	}
	sort.Strings(t.faultKinds)

	var rowEnd []float64
	for i := range t.faults {
		f := &t.faults[i]
		for _, tok := range tlLaneTok.FindAllString(f.target, -1) {
			if l := t.byName[tok]; l != nil && l.kind != tlNemesis {
				f.lanes = append(f.lanes, l)
			}
		}
		x1, x2 := t.x(f.start), t.x(f.end)
		if tlStyleOf(f.fault).marker {
			x1 -= 6
		}
		ext := math.Max(x2, x1+14+float64(len(f.label()))*tlCharW)
		row := 0
		for row < len(rowEnd) && rowEnd[row] > x1 {
			row++
		}
		if row == len(rowEnd) {
			rowEnd = append(rowEnd, 0)
		}
		rowEnd[row], f.row = ext+4, row
	}
	if t.nemesis != nil {
		t.nemesis.h = math.Max(tlLaneH, 12+float64(max(len(rowEnd), 1))*tlNemRowH)
	}
}

func (f *tlFault) label() string {
	if f.target == "" {
		return f.fault
	}
	return f.fault + " " + f.target
}

// render writes the whole SVG.
func (t *repTimeline) render() string {
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

func (t *repTimeline) lanesBackground() {
	for i, l := range t.lanes {
		fill := "#ffffff"
		switch {
		case l.kind == tlNode:
			fill = "#f4f7fb"
		case l.kind == tlNemesis:
			fill = "#fbf7ef"
		case i%2 == 1:
			fill = "#fafafa"
		}
		fmt.Fprintf(&t.b, `<rect x="0" y="%.1f" width="%.0f" height="%.1f" fill="%s"/>`, l.y, t.width, l.h, fill)
		fmt.Fprintf(&t.b, `<line x1="0" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#dddddd"/>`, t.width, l.y+l.h, l.y+l.h)
	}
}

// grid draws the time axis above and below the lanes, with a gridline every
// step.
func (t *repTimeline) grid() {
	steps := []float64{0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600}
	step := steps[len(steps)-1]
	for _, s := range steps {
		if s*t.pxPerSec >= 90 {
			step = s
			break
		}
	}
	b := &t.b
	top, bottom := tlAxisH, t.height-tlAxisH
	b.WriteString(`<g class="grid">`)
	dur := float64(t.t1-t.t0) / 1e9
	for i := 0; float64(i)*step <= dur+1e-9; i++ {
		sec := float64(i) * step
		x := tlPad + sec*t.pxPerSec
		label := tlAxisLabel(sec)
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s"/>`, x, x, top-6, bottom+6, tlColGrid)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#666">%s</text>`, x, top-10, label)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#666">%s</text>`, x, bottom+20, label)
	}
	b.WriteString(`</g>`)
}

func tlAxisLabel(sec float64) string {
	d := time.Duration(math.Round(sec*10)) * 100 * time.Millisecond
	if d == 0 {
		return "0s"
	}
	return "+" + d.String()
}

// faultShading shades every lane a fault affects, from start to heal, and
// marks transfers and membership changes on their node.
func (t *repTimeline) faultShading() {
	b := &t.b
	b.WriteString(`<g class="faults">`)
	for i := range t.faults {
		f := &t.faults[i]
		st := tlStyleOf(f.fault)
		title := t.faultTitle(f)
		for _, l := range f.lanes {
			if st.marker {
				x := t.x(f.start)
				fmt.Fprintf(b, `<g><title>%s</title><line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="2" stroke-dasharray="4 3"/>`,
					title, x, x, l.y+2, l.y+l.h-2, st.color)
				fmt.Fprintf(b, `<path d="%s" fill="%s"/><text x="%.1f" y="%.1f" fill="%s" class="halo">%s</text></g>`,
					tlDiamond(x, l.y+l.h-10, 6), st.color, x+8, l.y+l.h-6, st.text, repEsc(st.label))
				continue
			}
			x1, x2 := t.x(f.start), t.x(f.end)
			fmt.Fprintf(b, `<g><title>%s</title><rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" fill-opacity="0.28" stroke="%s" stroke-dasharray="5 3"/>`,
				title, x1, l.y+1, math.Max(x2-x1, 2), l.h-2, st.color, st.color)
			label := st.label
			if f.fault == history.FaultPartition && f.target != "" {
				label += ": " + f.target
			}
			if !f.healed {
				label += ", never healed"
			}
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="%s" font-weight="600" class="halo">%s</text></g>`,
				x1+4, l.y+l.h-5, st.text, repEsc(label))
		}
		if f.fault == history.FaultPartition && len(f.lanes) > 1 {
			// A bracket joining the partitioned nodes at the start.
			top, bot := f.lanes[0].y, f.lanes[0].y+f.lanes[0].h
			for _, l := range f.lanes {
				top, bot = math.Min(top, l.y), math.Max(bot, l.y+l.h)
			}
			x := t.x(f.start)
			fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="3"/>`, x, x, top+2, bot-2, st.color)
		}
	}
	b.WriteString(`</g>`)
}

func (t *repTimeline) faultTitle(f *tlFault) string {
	var s strings.Builder
	fmt.Fprintf(&s, "fault %s", f.fault)
	if f.target != "" {
		fmt.Fprintf(&s, " on %s", f.target)
	}
	fmt.Fprintf(&s, "\ninjected %s", t.rel(f.start))
	switch {
	case tlStyleOf(f.fault).marker && f.end == f.start:
	case f.healed:
		fmt.Fprintf(&s, ", healed %s (after %s)", t.rel(f.end), repDur(f.end-f.start))
	default:
		s.WriteString(", never healed")
	}
	if f.startErr != "" {
		fmt.Fprintf(&s, "\nerror: %s", f.startErr)
	}
	if f.healErr != "" {
		fmt.Fprintf(&s, "\nheal error: %s", f.healErr)
	}
	return repEsc(s.String())
}

// grantBars draws each grant on its holder's lane, labelled with the lock
// name and token. After the holder stopped renewing, the bar turns pale:
// the holder may still act on it until its SDK tells it the grant is lost.
func (t *repTimeline) grantBars() {
	b := &t.b
	b.WriteString(`<g class="grants">`)
	for _, g := range t.grants {
		l := t.byName[g.proc]
		if l == nil {
			continue
		}
		col := t.lockColor[g.name]
		x1, x2 := t.x(g.start), t.x(g.end)
		y := l.y + 8
		text := fmt.Sprintf("%s holds %s with token %d (session %d)\ngranted %s (acquire invoked %s)\n%s",
			g.proc, g.name, g.token, g.session, t.rel(g.start), t.rel(g.acquire.Invoke), g.how)
		if g.goneAt != 0 {
			text += fmt.Sprintf("\nover on the servers by %s (%s), but %s did not know yet: only its token can stop a late write",
				t.rel(g.goneAt), g.goneWhy, g.proc)
		}
		title := repEsc(text)
		fmt.Fprintf(b, `<g><title>%s</title>`, title)
		if ax := t.x(g.acquire.Invoke); x1-ax >= 2 {
			// The wait for the grant.
			fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5" stroke-dasharray="2 2"/>`, ax, x1, y+9, y+9, col)
		}
		solidEnd := x2
		if g.lostFrom != 0 {
			solidEnd = t.x(g.lostFrom)
		}
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="18" rx="3" fill="%s"/>`, x1, y, math.Max(solidEnd-x1, 1.5), col)
		if g.lostFrom != 0 && x2 > solidEnd {
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="18" rx="3" fill="%s" fill-opacity="0.3" stroke="%s" stroke-dasharray="3 2"/>`,
				solidEnd, y, x2-solidEnd, col, col)
		}
		goneX := x2
		if g.goneAt != 0 {
			// Over on the servers, the holder unaware: stripes.
			goneX = t.x(g.goneAt)
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="18" rx="3" fill="url(#gone)"/>`, goneX, y, math.Max(x2-goneX, 1.5))
			fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#222" stroke-width="1.5"/>`, goneX, goneX, y-3, y+21)
		}
		label := fmt.Sprintf("%s #%d", g.name, g.token)
		lw := float64(len(label))*tlCharW + 8
		// The label, repeated along long bars so it stays in view while
		// scrolling.
		for lx := x1 + 4; lx+lw <= goneX+2; lx += 900 {
			fill, cls := "#ffffff", ""
			if lx >= solidEnd {
				fill, cls = col, ` class="halo"`
			}
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="%s" font-weight="600"%s>%s</text>`, lx, y+13, fill, cls, repEsc(label))
		}
		if g.goneAt != 0 {
			note := "lost on the servers, " + g.proc + " doesn't know"
			if nw := float64(len(note))*tlCharW + 12; goneX+nw > x2 {
				note = g.proc + " unaware"
			}
			if nw := float64(len(note))*tlCharW + 12; goneX+nw <= x2 {
				fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="#ffffff" stroke="%s" stroke-width="3" stroke-linejoin="round" paint-order="stroke" font-weight="700">%s</text>`,
					goneX+6, y+13, col, repEsc(note))
			}
		}
		b.WriteString(`</g>`)
	}
	b.WriteString(`</g>`)
}

// mark is one routine mark waiting to be drawn, maybe merged with its
// neighbours.
type tlMark struct {
	x  float64
	op history.

		// clientOps draws every client op but stale writes: accepted writes as
		// green ticks, reads as dots, failures grey, unknown outcomes hatched.
		// Accepted writes and reads closer than tlBucket pixels on one lane are
		// merged into one mark whose tooltip counts them.
		Op
}

func (t *repTimeline) clientOps() {
	b := &t.b
	writes := map[*tlLane][]tlMark{}
	reads := map[*tlLane][]tlMark{}
	b.WriteString(`<g class="ops">`)
	for _, op := range t.ops {
		if !repIsClientOp(op) {
			continue
		}
		l := t.byName[op.Process]
		if l == nil {
			continue
		}
		x1, x2 := t.span(op)
		_, marked := t.marked[op]
		switch {
		case op.Outcome == history.Unknown || op.Complete < op.Invoke:
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="19" fill="url(#hatch)" stroke="#8a8a8a" stroke-width="0.8"><title>%s</title></rect>`,
				x1, l.y+29, math.Max(x2-x1, 4), t.opTitle(op))
		case op.Kind == history.OpWrite && op.Outcome == history.Stale:
			// Drawn on top, by staleWrites.
		case op.Kind == history.OpWrite && op.Outcome == history.OK:
			if marked {
				t.tick(l, x2, tlColOK, 2, t.opTitle(op))
			} else {
				writes[l] = append(writes[l], tlMark{x2, op})
			}
		case op.Kind == history.OpRead && (op.Outcome == history.OK || op.Outcome == history.NotFound):
			if marked {
				t.dot(l, x2, op.Outcome == history.OK, t.opTitle(op))
			} else {
				reads[l] = append(reads[l], tlMark{x2, op})
			}
		case op.Outcome == history.Fail || (op.Outcome != history.OK && op.Kind != history.OpRelease):
			fmt.Fprintf(b, `<g><title>%s</title><line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="1.2"/>`,
				t.opTitle(op), x1, math.Max(x2, x1+2), l.y+35, l.y+35, tlColFail)
			fmt.Fprintf(b, `<path d="M%.1f %.1fl6 6m0 -6l-6 6" stroke="%s" stroke-width="1.5"/></g>`, x2-3, l.y+32, tlColFail)
		case op.Kind == history.OpRelease || op.Kind == history.OpExpire:
			// Where its grant's bar ends; a small cap for the tooltip.
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="3" height="20" fill="#555"><title>%s</title></rect>`, x2-1.5, l.y+6, t.opTitle(op))
		case op.Kind == history.OpAcquire:
			// The grant bar shows it.
		default:
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="2" fill="#888"><title>%s</title></circle>`, x2, l.y+45, t.opTitle(op))
		}
	}
	for _, l := range t.lanes {
		t.merged(writes[l], func(ms []tlMark) {
			if len(ms) == 1 {
				t.tick(l, ms[0].x, tlColOK, 2, t.opTitle(ms[0].op))
				return
			}
			t.tick(l, ms[0].x, tlColOK, math.Max(2, ms[len(ms)-1].x-ms[0].x+2), t.groupTitle(ms, "writes accepted"))
		})
		t.merged(reads[l], func(ms []tlMark) {
			if len(ms) == 1 {
				t.dot(l, ms[0].x, ms[0].op.Outcome == history.OK, t.opTitle(ms[0].op))
				return
			}
			t.dot(l, ms[0].x, true, t.groupTitle(ms, "reads"))
		})
	}
	b.WriteString(`</g>`)
}

// merged calls draw with runs of marks closer than tlBucket pixels.
func (t *repTimeline) merged(ms []tlMark, draw func([]tlMark)) {
	for _, g := range tlGroups(ms) {
		draw(g)
	}
}

// tlGroups sorts ms and cuts it into runs of marks closer than tlBucket
// pixels.
func tlGroups(ms []tlMark) [][]tlMark {
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].x < ms[j].x })
	var out [][]tlMark
	for i := 0; i < len(ms); {
		j := i + 1
		for j < len(ms) && ms[j].x-ms[i].x < tlBucket {
			j++
		}
		out = append(out, ms[i:j])
		i = j
	}
	return out
}

func (t *repTimeline) tick(l *tlLane, x float64, col string, w float64, title string) {
	fmt.Fprintf(&t.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="12" fill="%s"><title>%s</title></rect>`, x-1, l.y+29, w, col, title)
}

func (t *repTimeline) dot(l *tlLane, x float64, filled bool, title string) {
	fill := tlColRead
	if !filled {
		fill = "#ffffff"
	}
	fmt.Fprintf(&t.b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s" stroke="%s" stroke-width="1.2"><title>%s</title></circle>`, x, l.y+45, fill, tlColRead, title)
}

// serverEvents draws what each node applied: grants in the lock's colour,
// releases grey, session expiries as an orange cross.
func (t *repTimeline) serverEvents() {
	b := &t.b
	type evKey struct {
		l    *tlLane
		kind history.Kind
	}
	evs := map[evKey][]tlMark{}
	b.WriteString(`<g class="server">`)
	for _, op := range t.ops {
		switch op.Kind {
		case history.OpServerGrant, history.OpServerRelease, history.OpServerExpire:
		default:
			continue
		}
		l := t.byName[op.Process]
		if l == nil {
			continue
		}
		k := evKey{l, op.Kind}
		evs[k] = append(evs[k], tlMark{t.x(op.Invoke), op})
	}
	for _, l := range t.lanes {
		for _, kind := range []history.Kind{history.OpServerGrant, history.OpServerRelease, history.OpServerExpire} {
			groups := tlGroups(evs[evKey{l, kind}])
			for gi, ms := range groups {
				op := ms[0].op
				title := t.opTitle(op)
				if len(ms) > 1 {
					title = t.groupTitle(ms, strings.TrimPrefix(string(kind), "server_")+"s applied")
				}
				x := ms[0].x
				w := math.Max(2, ms[len(ms)-1].x-x+2)
				switch kind {
				case history.OpServerGrant:
					col := t.lockColor[op.Name]
					if col == "" || len(ms) > 1 && !tlSameName(ms) {
						col = "#555555"
					}
					fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="18" fill="%s"><title>%s</title></rect>`, x-1, l.y+8, w, col, title)
					label := fmt.Sprintf("#%d", op.Token)
					room := t.width - x
					if gi+1 < len(groups) {
						room = groups[gi+1][0].x - x
					}
					if len(ms) == 1 && op.Token != 0 && room >= float64(len(label))*tlCharW+10 {
						fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="%s" font-weight="600">%s</text>`, x+4, l.y+21, col, label)
					}
				case history.OpServerRelease:
					fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="9" fill="#8a8a8a"><title>%s</title></rect>`, x-1, l.y+29, w, title)
				case history.OpServerExpire:
					fmt.Fprintf(b, `<path d="M%.1f %.1fl7 7m0 -7l-7 7" stroke="%s" stroke-width="2"><title>%s</title></path>`, x-3.5, l.y+37, tlColExpire, title)
				}
			}
		}
	}
	b.WriteString(`</g>`)
}

func tlSameName(ms []tlMark) bool {
	for _, m := range ms[1:] {
		if m.op.Name != ms[0].op.Name {
			return false
		}
	}
	return true
}

// nemesisLane draws every fault as a bar (or a marker) in the nemesis lane.
func (t *repTimeline) nemesisLane() {
	l := t.nemesis
	if l == nil {
		return
	}
	b := &t.b
	b.WriteString(`<g class="nemesis">`)
	for i := range t.faults {
		f := &t.faults[i]
		st := tlStyleOf(f.fault)
		y := l.y + 8 + float64(f.row)*tlNemRowH
		x1, x2 := t.x(f.start), t.x(f.end)
		fmt.Fprintf(b, `<g><title>%s</title>`, t.faultTitle(f))
		if st.marker {
			if x2-x1 > 2 {
				fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>`, x1, x2, y+8, y+8, st.color)
			}
			fmt.Fprintf(b, `<path d="%s" fill="%s"/><text x="%.1f" y="%.1f" fill="%s" class="halo">%s</text></g>`,
				tlDiamond(x1, y+8, 7), st.color, x1+10, y+12, st.text, repEsc(f.label()))
			continue
		}
		dash := ""
		if !f.healed {
			dash = ` stroke-dasharray="4 3"`
		}
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="16" rx="3" fill="%s" fill-opacity="0.55" stroke="%s"%s/>`,
			x1, y, math.Max(x2-x1, 2), st.color, st.color, dash)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="%s" font-weight="600" class="halo">%s</text></g>`, x1+4, y+12, st.text, repEsc(f.label()))
	}
	b.WriteString(`</g>`)
}

func tlDiamond(x, y, r float64) string {
	return fmt.Sprintf("M%.1f %.1fl%.1f %.1fl%.1f %.1fl%.1f %.1fz", x, y-r, r, r, -r, r, -r, -r)
}

// staleWrites draws the writes the resource rejected for a stale token, on
// top of everything: the moment a paused former holder tried to write.
func (t *repTimeline) staleWrites() {
	b := &t.b
	byLane := map[*tlLane][]tlMark{}
	for _, op := range t.ops {
		if op.Kind != history.OpWrite || op.Outcome != history.Stale {
			continue
		}
		if l := t.byName[op.Process]; l != nil {
			_, x2 := t.span(op)
			byLane[l] = append(byLane[l], tlMark{x2, op})
		}
	}
	b.WriteString(`<g class="stale">`)
	for _, l := range t.lanes {
		ms := byLane[l]
		sort.SliceStable(ms, func(i, j int) bool { return ms[i].x < ms[j].x })
		for i, m := range ms {
			op := m.op
			x1, x2 := t.span(op)
			fmt.Fprintf(b, `<g class="stale-write"><title>%s</title>`, t.opTitle(op))
			if x2-x1 >= 2 {
				fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5"/>`, x1, x2, l.y+35, l.y+35, tlColStale)
			}
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="4" height="%.1f" fill="%s"/>`, x2-2, l.y+1, l.h-2, tlColStale)
			fmt.Fprintf(b, `<path d="M%.1f %.1fh14l-7 10z" fill="%s"/>`, x2-7, l.y+1, tlColStale)
			// The tokens, where the next stale write leaves room.
			label := fmt.Sprintf("stale #%d < #%d", op.Token, op.Required)
			room := t.width - x2
			if i+1 < len(ms) {
				room = ms[i+1].x - x2
			}
			if room >= float64(len(label))*tlCharW+12 {
				fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="%s" font-weight="700" class="halo">%s</text>`, x2+5, l.y+40, tlColStale, repEsc(label))
			}
			b.WriteString(`</g>`)
		}
	}
	b.WriteString(`</g>`)
}

// violationLines draws a faint guide down the whole canvas at each
// violation's first op, behind the lanes' content.
func (t *repTimeline) violationLines() {
	for _, x := range t.violationX {
		if x >= 0 {
			fmt.Fprintf(&t.b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-opacity="0.45" stroke-width="1.5" stroke-dasharray="6 4"/>`,
				x-5, x-5, tlAxisH-2, t.height-4, tlColViolate)
		}
	}
}

// violationMarks outlines every op a violation involves and flags the
// first one on the time axis; the violation list links to the flag.
func (t *repTimeline) violationMarks() {
	b := &t.b
	b.WriteString(`<g class="violations">`)
	for i, v := range t.violations {
		n := i + 1
		for _, op := range v.Ops {
			l := t.byName[op.Process]
			if op.Kind == history.OpFault || l == nil {
				l = t.nemesis
			}
			if l == nil {
				continue
			}
			x1, x2 := t.span(op)
			if x2-x1 < 12 {
				mid := (x1 + x2) / 2
				x1, x2 = mid-6, mid+6
			}
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" rx="4" fill="none" stroke="%s" stroke-width="2.5"><title>%s</title></rect>`,
				x1-4, l.y+3, x2-x1+8, l.h-6, tlColViolate, repEsc(fmt.Sprintf("V%d %s: %s", n, v.Check, v.Message)))
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="%s" font-weight="700" class="halo">V%d</text>`, x2+7, l.y+l.h-8, tlColViolate, n)
		}
		if x := t.violationX[i]; x >= 0 {
			fmt.Fprintf(b, `<g id="v%d"><title>%s</title><line x1="%.1f" x2="%.1f" y1="2" y2="%.1f" stroke="%s" stroke-width="1.5"/>`,
				n, repEsc(fmt.Sprintf("V%d %s: %s", n, v.Check, v.Message)), x-5, x-5, tlAxisH-2, tlColViolate)
			fmt.Fprintf(b, `<rect x="%.1f" y="1" width="26" height="14" rx="3" fill="%s"/><text x="%.1f" y="12" fill="#fff" font-weight="700">V%d</text></g>`,
				x-5, tlColViolate, x-1, n)
		}
	}
	b.WriteString(`</g>`)
}

// opTitle is the tooltip of one op.
func (t *repTimeline) opTitle(op history.Op) string {
	var s strings.Builder
	what := string(op.Kind)
	switch op.Kind {
	case history.OpAcquire, history.OpRelease, history.OpExpire, history.OpServerGrant, history.OpServerRelease, history.OpServerExpire:
		if op.Name != "" {
			what += " " + op.Name
		}
	case history.OpWrite, history.OpRead:
		if op.Key != "" {
			what += " " + op.Key
		}
	}
	outcome := op.Outcome
	switch {
	case op.Kind == history.OpWrite && op.Outcome == history.Stale:
		outcome = "REJECTED, stale token"
	case op.Outcome == history.Unknown:
		outcome = "unknown outcome (may or may not have taken effect)"
	}
	fmt.Fprintf(&s, "%s by %s: %s", what, op.Process, outcome)
	if op.Kind == history.OpWrite && op.Outcome == history.Stale {
		fmt.Fprintf(&s, "\npresented token %d, required %d", op.Token, op.Required)
	} else if op.Token != 0 {
		fmt.Fprintf(&s, "\ntoken %d", op.Token)
	}
	if op.Session != 0 {
		fmt.Fprintf(&s, ", session %d", op.Session)
	}
	if op.Version != 0 {
		fmt.Fprintf(&s, "\nversion %d", op.Version)
	}
	if op.Value != "" {
		fmt.Fprintf(&s, "\nvalue %q", op.Value)
	}
	if op.Result != "" {
		fmt.Fprintf(&s, "\nresult %s", op.Result)
	}
	if op.Seq != 0 {
		fmt.Fprintf(&s, "\napply seq %d", op.Seq)
	}
	if op.Complete > op.Invoke {
		fmt.Fprintf(&s, "\ninvoked %s, completed %s (%s)", t.rel(op.Invoke), t.rel(op.Complete), repDur(op.Complete-op.Invoke))
	} else if op.Complete < op.Invoke {
		fmt.Fprintf(&s, "\ninvoked %s, never completed", t.rel(op.Invoke))
	} else {
		fmt.Fprintf(&s, "\nat %s", t.rel(op.Invoke))
	}
	if op.Error != "" {
		fmt.Fprintf(&s, "\nerror: %s", op.Error)
	}
	for _, n := range t.marked[op] {
		v := t.violations[n-1]
		fmt.Fprintf(&s, "\nVIOLATION V%d %s: %s", n, v.Check, v.Message)
	}
	return repEsc(s.String())
}

// groupTitle is the tooltip of merged marks.
func (t *repTimeline) groupTitle(ms []tlMark, what string) string {
	first, last := ms[0].op, ms[len(ms)-1].op
	var lo, hi uint64
	subjects := map[string]bool{}
	for i, m := range ms {
		if i == 0 || m.op.Token < lo {
			lo = m.op.Token
		}
		hi = max(hi, m.op.Token)
		subjects[m.op.Key+m.op.Name] = true
	}
	var names []string
	for n := range subjects {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) > 5 {
		names = append(names[:5], "...")
	}
	s := fmt.Sprintf("%d %s by %s, %s to %s\n%s", len(ms), what, first.Process,
		t.rel(max(first.Complete, first.Invoke)), t.rel(max(last.Complete, last.Invoke)), strings.Join(names, ", "))
	if hi != 0 {
		s += fmt.Sprintf("\ntokens %d to %d", lo, hi)
	}
	return repEsc(s)
}

// overview is a strip the width of the page with the whole run: fault spans,
// stale writes and violations. Clicking it scrolls the timeline there.
func (t *repTimeline) overview() string {
	var b strings.Builder
	w := t.width
	fmt.Fprintf(&b, `<svg id="overview" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %.0f 40" preserveAspectRatio="none" width="100%%" height="40" data-width="%.0f">`, w, w)
	fmt.Fprintf(&b, `<rect width="%.0f" height="40" fill="#f6f6f6"/>`, w)
	tw := math.Max(2, w/700)
	for i := range t.faults {
		f := &t.faults[i]
		st := tlStyleOf(f.fault)
		x1, x2 := t.x(f.start), t.x(f.end)
		fmt.Fprintf(&b, `<rect x="%.1f" y="2" width="%.1f" height="16" fill="%s" fill-opacity="0.6"/>`, x1, math.Max(x2-x1, tw), st.color)
	}
	for _, g := range t.grants {
		x1, x2 := t.x(g.start), t.x(g.end)
		fmt.Fprintf(&b, `<rect x="%.1f" y="20" width="%.1f" height="4" fill="%s" fill-opacity="0.5"/>`, x1, math.Max(x2-x1, 1), t.lockColor[g.name])
	}
	for _, op := range t.ops {
		if op.Kind == history.OpWrite && op.Outcome == history.Stale {
			fmt.Fprintf(&b, `<rect x="%.1f" y="24" width="%.1f" height="16" fill="%s"/>`, t.x(op.Complete), tw, tlColStale)
		}
	}
	for i := range t.violations {
		if x := t.violationX[i]; x >= 0 {
			fmt.Fprintf(&b, `<rect x="%.1f" y="0" width="%.1f" height="40" fill="%s"/>`, x, tw*1.5, "#7a0000")
		}
	}
	b.WriteString(`<rect id="overview-view" x="0" y="0" width="0" height="40" fill="#000" fill-opacity="0.1" stroke="#333" stroke-width="1.5" vector-effect="non-scaling-stroke"/>`)
	b.WriteString(`</svg>`)
	return b.String()
}

// labels is the fixed column of lane names left of the scrolling timeline.
func (t *repTimeline) labels() string {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="96" height="%.0f" font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif">`, t.height)
	for _, l := range t.lanes {
		sub, fill := "client", "#ffffff"
		switch l.kind {
		case tlNode:
			sub, fill = "server", "#f4f7fb"
		case tlNemesis:
			sub, fill = "faults", "#fbf7ef"
		}
		fmt.Fprintf(&b, `<rect x="0" y="%.1f" width="96" height="%.1f" fill="%s"/><line x1="0" x2="96" y1="%.1f" y2="%.1f" stroke="#dddddd"/>`,
			l.y, l.h, fill, l.y+l.h, l.y+l.h)
		fmt.Fprintf(&b, `<text x="88" y="%.1f" text-anchor="end" font-size="14" font-weight="700" fill="#222">%s</text>`, l.y+l.h/2, repEsc(l.name))
		fmt.Fprintf(&b, `<text x="88" y="%.1f" text-anchor="end" font-size="10" fill="#777">%s</text>`, l.y+l.h/2+14, sub)
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// repEsc escapes text for XML and HTML alike.
func repEsc(s string) string { return template.HTMLEscapeString(s) }

// repDur formats a duration briefly: "20ms", "4.5s".
func repDur(ns int64) string {
	d := time.Duration(ns)
	switch {
	case d < time.Millisecond:
		return d.String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(10 * time.Millisecond).String()
}

// joinNonEmpty joins the non-empty parts with sep.
func repJoin(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}
