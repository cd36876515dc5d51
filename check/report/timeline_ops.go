package report

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/fenced-dev/fenced/check/history"
)

// mark is one routine mark waiting to be drawn, maybe merged with its
// neighbours.
type mark struct {
	x  float64
	op history.

		// clientOps draws every client op but stale writes: accepted writes as
		// green ticks, reads as dots, failures grey, unknown outcomes hatched.
		// Accepted writes and reads closer than tlBucket pixels on one lane are
		// merged into one mark whose tooltip counts them.
		Op
}

func (t *timeline) clientOps() {
	b := &t.b
	writes := map[*lane][]mark{}
	reads := map[*lane][]mark{}
	b.WriteString(`<g class="ops">`)
	for _, op := range t.ops {
		if !isClientOp(op) {
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
				writes[l] = append(writes[l], mark{x2, op})
			}
		case op.Kind == history.OpRead && (op.Outcome == history.OK || op.Outcome == history.NotFound):
			if marked {
				t.dot(l, x2, op.Outcome == history.OK, t.opTitle(op))
			} else {
				reads[l] = append(reads[l], mark{x2, op})
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
		t.merged(writes[l], func(ms []mark) {
			if len(ms) == 1 {
				t.tick(l, ms[0].x, tlColOK, 2, t.opTitle(ms[0].op))
				return
			}
			t.tick(l, ms[0].x, tlColOK, math.Max(2, ms[len(ms)-1].x-ms[0].x+2), t.groupTitle(ms, "writes accepted"))
		})
		t.merged(reads[l], func(ms []mark) {
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
func (t *timeline) merged(ms []mark, draw func([]mark)) {
	for _, g := range groups(ms) {
		draw(g)
	}
}

// tlGroups sorts ms and cuts it into runs of marks closer than tlBucket
// pixels.
func groups(ms []mark) [][]mark {
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].x < ms[j].x })
	var out [][]mark
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

func (t *timeline) tick(l *lane, x float64, col string, w float64, title string) {
	fmt.Fprintf(&t.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="12" fill="%s"><title>%s</title></rect>`, x-1, l.y+29, w, col, title)
}

func (t *timeline) dot(l *lane, x float64, filled bool, title string) {
	fill := tlColRead
	if !filled {
		fill = "#ffffff"
	}
	fmt.Fprintf(&t.b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s" stroke="%s" stroke-width="1.2"><title>%s</title></circle>`, x, l.y+45, fill, tlColRead, title)
}

// serverEvents draws what each node applied: grants in the lock's colour,
// releases grey, session expiries as an orange cross.
func (t *timeline) serverEvents() {
	b := &t.b
	type evKey struct {
		l    *lane
		kind history.Kind
	}
	evs := map[evKey][]mark{}
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
		evs[k] = append(evs[k], mark{t.x(op.Invoke), op})
	}
	for _, l := range t.lanes {
		for _, kind := range []history.Kind{history.OpServerGrant, history.OpServerRelease, history.OpServerExpire} {
			groups := groups(evs[evKey{l, kind}])
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
					if col == "" || len(ms) > 1 && !sameName(ms) {
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

func sameName(ms []mark) bool {
	for _, m := range ms[1:] {
		if m.op.Name != ms[0].op.Name {
			return false
		}
	}
	return true
}

// staleWrites draws the writes the resource rejected for a stale token, on
// top of everything: the moment a paused former holder tried to write.
func (t *timeline) staleWrites() {
	b := &t.b
	byLane := map[*lane][]mark{}
	for _, op := range t.ops {
		if op.Kind != history.OpWrite || op.Outcome != history.Stale {
			continue
		}
		if l := t.byName[op.Process]; l != nil {
			_, x2 := t.span(op)
			byLane[l] = append(byLane[l], mark{x2, op})
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
				fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="%s" font-weight="700" class="halo">%s</text>`, x2+5, l.y+40, tlColStale, esc(label))
			}
			b.WriteString(`</g>`)
		}
	}
	b.WriteString(`</g>`)
}
