package report

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/fenced-dev/fenced/check/history"
)

// grid draws the time axis above and below the lanes, with a gridline every
// step.
func (t *timeline) grid() {
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
		label := axisLabel(sec)
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s"/>`, x, x, top-6, bottom+6, tlColGrid)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#666">%s</text>`, x, top-10, label)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#666">%s</text>`, x, bottom+20, label)
	}
	b.WriteString(`</g>`)
}

func axisLabel(sec float64) string {
	d := time.Duration(math.Round(sec*10)) * 100 * time.Millisecond
	if d == 0 {
		return "0s"
	}
	return "+" + d.String()
}

// overview is a strip the width of the page with the whole run: fault spans,
// stale writes and violations. Clicking it scrolls the timeline there.
func (t *timeline) overview() string {
	var b strings.Builder
	w := t.width
	fmt.Fprintf(&b, `<svg id="overview" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %.0f 40" preserveAspectRatio="none" width="100%%" height="40" data-width="%.0f">`, w, w)
	fmt.Fprintf(&b, `<rect width="%.0f" height="40" fill="#f6f6f6"/>`, w)
	tw := math.Max(2, w/700)
	for i := range t.faults {
		f := &t.faults[i]
		st := styleOf(f.fault)
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
