package report

import (
	"fmt"
	"html/template"
	"sort"
	"strings"
	"time"

	"github.com/fenced-dev/fenced/check/history"
)

// opTitle is the tooltip of one op.
func (t *timeline) opTitle(op history.Op) string {
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
		fmt.Fprintf(&s, "\ninvoked %s, completed %s (%s)", t.rel(op.Invoke), t.rel(op.Complete), shortDur(op.Complete-op.Invoke))
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
	return esc(s.String())
}

// groupTitle is the tooltip of merged marks.
func (t *timeline) groupTitle(ms []mark, what string) string {
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
	return esc(s)
}

// esc escapes text for XML and HTML alike.
func esc(s string) string { return template.HTMLEscapeString(s) }

// shortDur formats a duration briefly: "20ms", "4.5s".
func shortDur(ns int64) string {
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
func joinNonEmpty(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}
