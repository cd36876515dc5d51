package report

import (
	"fmt"
	"math"
	"sort"

	"github.com/fenced-dev/fenced/check/history"
)

// findGrants turns each OK acquire into a bar that lasts until the same
// process releases the name or lets it expire, or until the end. The
// permits one semaphore acquire took (recorded as acquires with one
// invocation) are a bar each, ended together.
func (t *timeline) findGrants() {
	open := map[[2]string][]int{} // process, name -> indexes in t.grants
	closeAt := func(i int, end int64, how string) {
		g := &t.grants[i]
		g.end, g.how = max(end, g.start), how
	}
	for _, op := range t.ops {
		if !isClientOp(op) || op.Name == "" {
			continue
		}
		k := [2]string{op.Process, op.Name}
		switch op.Kind {
		case history.OpAcquire:
			if op.Outcome != history.OK {
				continue
			}
			if is := open[k]; len(is) > 0 && t.grants[is[0]].acquire.Invoke != op.Invoke {
				for _, i := range is {
					closeAt(i, op.Invoke, "acquired again at "+t.rel(op.Invoke))
				}
				delete(open, k)
			}
			start := max(op.Complete, op.Invoke)
			t.grants = append(t.grants, grantSpan{proc: op.Process, name: op.Name, token: op.Token,
				session: op.Session, acquire: op, start: start})
			open[k] = append(open[k], len(t.grants)-1)
		case history.OpRelease:
			how := "released at " + t.rel(max(op.Complete, op.Invoke))
			if r := joinResult(op.Result, op.Outcome); r != "" {
				how += " (" + r + ")"
			}
			for _, i := range open[k] {
				closeAt(i, max(op.Complete, op.Invoke), how)
			}
			delete(open, k)
		case history.OpExpire:
			end := max(op.Complete, op.Invoke)
			for _, i := range open[k] {
				t.grants[i].lostFrom = max(op.Invoke, t.grants[i].start)
				closeAt(i, end, fmt.Sprintf("stopped renewing at %s, SDK reported it lost at %s", t.rel(op.Invoke), t.rel(end)))
			}
			delete(open, k)
		}
	}
	for _, is := range open {
		for _, i := range is {
			closeAt(i, t.t1, "still held at the end of the history")
		}
	}
	t.findGone()
}

// spanObject is what a grant excludes others from: a permit's slot (its
// scope), the name otherwise.
func spanObject(op history.Op) string {
	if op.GrantKind == history.GrantPermit && op.Scope != "" {
		return op.Scope
	}
	return op.Name
}

// findGone sets goneAt of every grant whose holder kept it after the
// servers were done with it: the window a fencing token exists for. A
// read grant is not gone when another reader is granted.
func (t *timeline) findGone() {
	type ev struct {
		at      int64
		session uint64
		proc    string
		why     string
		read    bool
	}
	others := map[string][]ev{}  // object (spanObject) -> grants to anyone, by time
	expires := map[uint64][]ev{} // session -> server expiries, by time
	for _, op := range t.ops {
		switch {
		case op.Kind == history.OpServerGrant:
			others[spanObject(op)] = append(others[spanObject(op)], ev{op.Invoke, op.Session, op.Process,
				fmt.Sprintf("%s granted %s to session %d (token %d)", op.Process, spanObject(op), op.Session, op.Token), op.GrantKind == history.GrantRead})
		case op.Kind == history.OpServerExpire && op.Session != 0:
			expires[op.Session] = append(expires[op.Session], ev{op.Invoke, op.Session, op.Process,
				fmt.Sprintf("%s expired session %d", op.Process, op.Session), false})
		case op.Kind == history.OpAcquire && op.Outcome == history.OK && isClientOp(op):
			at := max(op.Complete, op.Invoke)
			others[spanObject(op)] = append(others[spanObject(op)], ev{at, op.Session, op.Process,
				fmt.Sprintf("%s was granted %s with token %d", op.Process, spanObject(op), op.Token), op.GrantKind == history.GrantRead})
		}
	}
	for _, evs := range others {
		sort.SliceStable(evs, func(i, j int) bool { return evs[i].at < evs[j].at })
	}
	for _, evs := range expires {
		sort.SliceStable(evs, func(i, j int) bool { return evs[i].at < evs[j].at })
	}
	first := func(evs []ev, g *grantSpan, skip func(ev) bool) (ev, bool) {
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
		e, ok := first(others[spanObject(g.acquire)], g, func(e ev) bool {
			return e.proc == g.proc || (g.session != 0 && e.session == g.session) || (e.read && g.acquire.GrantKind == history.GrantRead)
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

func joinResult(result, outcome string) string {
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

// grantBars draws each grant on its holder's lane, labelled with the lock
// name and token. After the holder stopped renewing, the bar turns pale:
// the holder may still act on it until its SDK tells it the grant is lost.
func (t *timeline) grantBars() {
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
		title := esc(text)
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
		label := fmt.Sprintf("%s #%d", spanObject(g.acquire), g.token)
		lw := float64(len(label))*tlCharW + 8
		// The label, repeated along long bars so it stays in view while
		// scrolling.
		for lx := x1 + 4; lx+lw <= goneX+2; lx += 900 {
			fill, cls := "#ffffff", ""
			if lx >= solidEnd {
				fill, cls = col, ` class="halo"`
			}
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="%s" font-weight="600"%s>%s</text>`, lx, y+13, fill, cls, esc(label))
		}
		if g.goneAt != 0 {
			note := "lost on the servers, " + g.proc + " doesn't know"
			if nw := float64(len(note))*tlCharW + 12; goneX+nw > x2 {
				note = g.proc + " unaware"
			}
			if nw := float64(len(note))*tlCharW + 12; goneX+nw <= x2 {
				fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="#ffffff" stroke="%s" stroke-width="3" stroke-linejoin="round" paint-order="stroke" font-weight="700">%s</text>`,
					goneX+6, y+13, col, esc(note))
			}
		}
		b.WriteString(`</g>`)
	}
	b.WriteString(`</g>`)
}
