package report

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/fenced-dev/fenced/check/history"
)

// faultStyle is how a fault kind is drawn.
type faultStyle struct {
	color  string // fill of its spans and markers
	text   string // colour of its labels
	label  string // what the shading on an affected lane says
	marker bool   // drawn as a marker at its start instead of a span
}

var faultStyles = map[string]faultStyle{
	history.FaultPauseClient: {"#f2c230", "#7a5c00", "paused (SIGSTOP)", false},
	history.FaultPauseServer: {"#f08a24", "#8a4300", "paused (SIGSTOP)", false},
	history.FaultKill:        {"#6b6b6b", "#333333", "killed", false},
	history.FaultPartition:   {"#3d9be0", "#0d4f80", "partitioned", false},
	history.FaultSkew:        {"#b07cd8", "#5b2d80", "clock skewed", false},
	history.FaultTransfer:    {"#1f9e8f", "#0b5c53", "leadership transfer", true},
	history.FaultMembership:  {"#7d8a96", "#3c4650", "membership change", true},
}

func styleOf(fault string) faultStyle {
	if st, ok := faultStyles[fault]; ok {
		return st
	}
	return faultStyle{"#a0a0a0", "#444444", fault, false}
}

// findFaults pairs each fault's start with its heal (same Fault and Target;
// Fault "all" heals everything still open) and lays the spans out in rows of
// the nemesis lane.
func (t *timeline) findFaults() {
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
			t.faults = append(t.faults, faultSpan{fault: op.Fault, target: op.Target,
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
			t.faults = append(t.faults, faultSpan{fault: op.Fault, target: op.Target,
				start: op.Invoke, end: op.Invoke, healed: true, startErr: joinNonEmpty("; ", op.Outcome, op.Error)})
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
		for _, tok := range laneToken.FindAllString(f.target, -1) {
			if l := t.byName[tok]; l != nil && l.kind != laneNemesis {
				f.lanes = append(f.lanes, l)
			}
		}
		x1, x2 := t.x(f.start), t.x(f.end)
		if styleOf(f.fault).marker {
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

func (f *faultSpan) label() string {
	if f.target == "" {
		return f.fault
	}
	return f.fault + " " + f.target
}

// faultShading shades every lane a fault affects, from start to heal, and
// marks transfers and membership changes on their node.
func (t *timeline) faultShading() {
	b := &t.b
	b.WriteString(`<g class="faults">`)
	for i := range t.faults {
		f := &t.faults[i]
		st := styleOf(f.fault)
		title := t.faultTitle(f)
		for _, l := range f.lanes {
			if st.marker {
				x := t.x(f.start)
				fmt.Fprintf(b, `<g><title>%s</title><line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="2" stroke-dasharray="4 3"/>`,
					title, x, x, l.y+2, l.y+l.h-2, st.color)
				fmt.Fprintf(b, `<path d="%s" fill="%s"/><text x="%.1f" y="%.1f" fill="%s" class="halo">%s</text></g>`,
					diamond(x, l.y+l.h-10, 6), st.color, x+8, l.y+l.h-6, st.text, esc(st.label))
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
				x1+4, l.y+l.h-5, st.text, esc(label))
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

func (t *timeline) faultTitle(f *faultSpan) string {
	var s strings.Builder
	fmt.Fprintf(&s, "fault %s", f.fault)
	if f.target != "" {
		fmt.Fprintf(&s, " on %s", f.target)
	}
	fmt.Fprintf(&s, "\ninjected %s", t.rel(f.start))
	switch {
	case styleOf(f.fault).marker && f.end == f.start:
	case f.healed:
		fmt.Fprintf(&s, ", healed %s (after %s)", t.rel(f.end), shortDur(f.end-f.start))
	default:
		s.WriteString(", never healed")
	}
	if f.startErr != "" {
		fmt.Fprintf(&s, "\nerror: %s", f.startErr)
	}
	if f.healErr != "" {
		fmt.Fprintf(&s, "\nheal error: %s", f.healErr)
	}
	return esc(s.String())
}

// nemesisLane draws every fault as a bar (or a marker) in the nemesis lane.
func (t *timeline) nemesisLane() {
	l := t.nemesis
	if l == nil {
		return
	}
	b := &t.b
	b.WriteString(`<g class="nemesis">`)
	for i := range t.faults {
		f := &t.faults[i]
		st := styleOf(f.fault)
		y := l.y + 8 + float64(f.row)*tlNemRowH
		x1, x2 := t.x(f.start), t.x(f.end)
		fmt.Fprintf(b, `<g><title>%s</title>`, t.faultTitle(f))
		if st.marker {
			if x2-x1 > 2 {
				fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>`, x1, x2, y+8, y+8, st.color)
			}
			fmt.Fprintf(b, `<path d="%s" fill="%s"/><text x="%.1f" y="%.1f" fill="%s" class="halo">%s</text></g>`,
				diamond(x1, y+8, 7), st.color, x1+10, y+12, st.text, esc(f.label()))
			continue
		}
		dash := ""
		if !f.healed {
			dash = ` stroke-dasharray="4 3"`
		}
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="16" rx="3" fill="%s" fill-opacity="0.55" stroke="%s"%s/>`,
			x1, y, math.Max(x2-x1, 2), st.color, st.color, dash)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="%s" font-weight="600" class="halo">%s</text></g>`, x1+4, y+12, st.text, esc(f.label()))
	}
	b.WriteString(`</g>`)
}

func diamond(x, y, r float64) string {
	return fmt.Sprintf("M%.1f %.1fl%.1f %.1fl%.1f %.1fl%.1f %.1fz", x, y-r, r, r, -r, r, -r, -r)
}
