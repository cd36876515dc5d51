package report

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/fenced-dev/fenced/check/history"
)

// Lane names: nodes are n1, n2...; client processes p1, p2...
var (
	nodeRE    = regexp.MustCompile(`^n[0-9]+$`)
	clientRE  = regexp.MustCompile(`^p[0-9]+$`)
	laneToken = regexp.MustCompile(`[A-Za-z]+[0-9]+`)
)

// layoutLanes creates the lanes: clients (p1, p2, ... then any other
// process), nodes, the nemesis.
func (t *timeline) layoutLanes(all history.History) {
	seen := map[string]bool{}
	var clients, others, nodes []string
	add := func(name string) {
		if name == "" || seen[name] || name == history.NemesisProcess {
			return
		}
		seen[name] = true
		switch {
		case nodeRE.MatchString(name):
			nodes = append(nodes, name)
		case clientRE.MatchString(name):
			clients = append(clients, name)
		default:
			others = append(others, name)
		}
	}
	hasNemesis := false
	for _, op := range all {
		if op.Kind == history.OpFault || op.Process == history.NemesisProcess {
			hasNemesis = true
			for _, tok := range laneToken.FindAllString(op.Target, -1) {
				if nodeRE.MatchString(tok) || clientRE.MatchString(tok) {
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
	sort.Slice(clients, func(i, j int) bool { return laneLess(clients[i], clients[j]) })
	sort.Slice(nodes, func(i, j int) bool { return laneLess(nodes[i], nodes[j]) })
	sort.Strings(others)
	sort.Slice(t.lockNames, func(i, j int) bool { return laneLess(t.lockNames[i], t.lockNames[j]) })
	for i, n := range t.lockNames {
		t.lockColor[n] = palette[i%len(palette)]
	}
	for _, n := range append(clients, others...) {
		t.addLane(n, laneClient)
	}
	for _, n := range nodes {
		t.addLane(n, laneNode)
	}
	if hasNemesis || len(t.lanes) == 0 {
		t.nemesis = t.addLane(history.NemesisProcess, laneNemesis)
	}
}

func (t *timeline) addLane(name string, k laneKind) *lane {
	l := &lane{name: name, kind: k, h: tlLaneH}
	t.lanes = append(t.lanes, l)
	t.byName[name] = l
	return l
}

// placeLanes gives every lane its y, once the nemesis lane knows its rows.
func (t *timeline) placeLanes() {
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
func laneLess(a, b string) bool {
	pa, na := splitNum(a)
	pb, nb := splitNum(b)
	if pa != pb {
		return pa < pb
	}
	if na != nb {
		return na < nb
	}
	return a < b
}

func splitNum(s string) (string, int) {
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

func (t *timeline) lanesBackground() {
	for i, l := range t.lanes {
		fill := "#ffffff"
		switch {
		case l.kind == laneNode:
			fill = "#f4f7fb"
		case l.kind == laneNemesis:
			fill = "#fbf7ef"
		case i%2 == 1:
			fill = "#fafafa"
		}
		fmt.Fprintf(&t.b, `<rect x="0" y="%.1f" width="%.0f" height="%.1f" fill="%s"/>`, l.y, t.width, l.h, fill)
		fmt.Fprintf(&t.b, `<line x1="0" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#dddddd"/>`, t.width, l.y+l.h, l.y+l.h)
	}
}

// labels is the fixed column of lane names left of the scrolling timeline.
func (t *timeline) labels() string {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="96" height="%.0f" font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif">`, t.height)
	for _, l := range t.lanes {
		sub, fill := "client", "#ffffff"
		switch l.kind {
		case laneNode:
			sub, fill = "server", "#f4f7fb"
		case laneNemesis:
			sub, fill = "faults", "#fbf7ef"
		}
		fmt.Fprintf(&b, `<rect x="0" y="%.1f" width="96" height="%.1f" fill="%s"/><line x1="0" x2="96" y1="%.1f" y2="%.1f" stroke="#dddddd"/>`,
			l.y, l.h, fill, l.y+l.h, l.y+l.h)
		fmt.Fprintf(&b, `<text x="88" y="%.1f" text-anchor="end" font-size="14" font-weight="700" fill="#222">%s</text>`, l.y+l.h/2, esc(l.name))
		fmt.Fprintf(&b, `<text x="88" y="%.1f" text-anchor="end" font-size="10" fill="#777">%s</text>`, l.y+l.h/2+14, sub)
	}
	b.WriteString(`</svg>`)
	return b.String()
}
