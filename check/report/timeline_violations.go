package report

import (
	"fmt"

	"github.com/fenced-dev/fenced/check/history"
)

// violationLines draws a faint guide down the whole canvas at each
// violation's first op, behind the lanes' content.
func (t *timeline) violationLines() {
	for _, x := range t.violationX {
		if x >= 0 {
			fmt.Fprintf(&t.b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-opacity="0.45" stroke-width="1.5" stroke-dasharray="6 4"/>`,
				x-5, x-5, tlAxisH-2, t.height-4, tlColViolate)
		}
	}
}

// violationMarks outlines every op a violation involves and flags the
// first one on the time axis; the violation list links to the flag.
func (t *timeline) violationMarks() {
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
				x1-4, l.y+3, x2-x1+8, l.h-6, tlColViolate, esc(fmt.Sprintf("V%d %s: %s", n, v.Check, v.Message)))
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="%s" font-weight="700" class="halo">V%d</text>`, x2+7, l.y+l.h-8, tlColViolate, n)
		}
		if x := t.violationX[i]; x >= 0 {
			fmt.Fprintf(b, `<g id="v%d"><title>%s</title><line x1="%.1f" x2="%.1f" y1="2" y2="%.1f" stroke="%s" stroke-width="1.5"/>`,
				n, esc(fmt.Sprintf("V%d %s: %s", n, v.Check, v.Message)), x-5, x-5, tlAxisH-2, tlColViolate)
			fmt.Fprintf(b, `<rect x="%.1f" y="1" width="26" height="14" rx="3" fill="%s"/><text x="%.1f" y="12" fill="#fff" font-weight="700">V%d</text></g>`,
				x-5, tlColViolate, x-1, n)
		}
	}
	b.WriteString(`</g>`)
}
