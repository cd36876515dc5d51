package readmetest

import (
	"regexp"
	"strconv"
	"strings"
)

// forms are the parts of an output that vary from run to run, each matched
// by its form when a block names it in vary=. Earlier forms win where two
// could match.
var forms = []struct {
	name string
	re   *regexp.Regexp // finds the part in the page's output
	pat  func(s string) string
}{
	// RFC 3339 times and plain dates: 2026-11-30T23:48:53.54684039Z, 2036-11-27.
	{"time", regexp.MustCompile(`\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2}))?`), func(s string) string {
		if len(s) == 10 {
			return `\d{4}-\d{2}-\d{2}`
		}
		return `\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})`
	}},
	// Issuers, secrets, SHA-256s: 16 or more hex digits, matched by length.
	{"hex", regexp.MustCompile(`\b[0-9a-f]{16,}\b`), func(s string) string {
		return `[0-9a-f]{` + strconv.Itoa(len(s)) + `}`
	}},
	// Which member leads: "leader n2" and a member's role in a column
	// (with the spaces that pad it).
	{"role", regexp.MustCompile(`\bleader n\d+|\b(leader|follower|candidate) +`), func(s string) string {
		if strings.HasPrefix(s, "leader n") {
			return `leader n\d+`
		}
		return `(leader|follower|candidate) +`
	}},
	// Go durations: 1.5s, 312.4ms, 1m30s.
	{"dur", regexp.MustCompile(`\b(\d+(\.\d+)?(ns|µs|us|ms|s|m|h))+\b`), func(string) string {
		return `(\d+(\.\d+)?(ns|µs|us|ms|s|m|h))+`
	}},
	// Any decimal number: tokens, session ids, indexes, counts.
	// Any decimal number: tokens, session ids, indexes, counts, with the
	// spaces after it (a column padded to its width).
	{"num", regexp.MustCompile(`\d+(\.\d+)? *`), func(string) string { return `\d+(\.\d+)? *` }},
}

// lineMatcher matches one line of output.
type lineMatcher struct {
	any   bool           // a "..." line: any number of lines
	exact string         // compared exactly when re is nil
	re    *regexp.Regexp // the line with its varying parts by form
}

// compile turns the lines a page shows into matchers for the forms in vary.
func compile(want []string, vary map[string]bool) []lineMatcher {
	var out []lineMatcher
	for _, w := range want {
		if vary["..."] && strings.TrimSpace(w) == "..." {
			out = append(out, lineMatcher{any: true})
			continue
		}
		pat, varied := linePattern(w, vary)
		if !varied {
			out = append(out, lineMatcher{exact: w})
			continue
		}
		out = append(out, lineMatcher{re: regexp.MustCompile(`^` + pat + `$`)})
	}
	return out
}

// linePattern returns w as a regular expression with every varying part
// replaced by its form, and whether anything varied.
func linePattern(w string, vary map[string]bool) (string, bool) {
	type span struct {
		from, to int
		pat      string
	}
	var spans []span
	taken := make([]bool, len(w))
	if vary["..."] {
		for i := 0; ; {
			j := strings.Index(w[i:], "...")
			if j < 0 {
				break
			}
			spans = append(spans, span{i + j, i + j + 3, `.*`})
			for k := i + j; k < i+j+3; k++ {
				taken[k] = true
			}
			i += j + 3
		}
	}
	for _, f := range forms {
		if !vary[f.name] {
			continue
		}
	next:
		for _, loc := range f.re.FindAllStringIndex(w, -1) {
			for k := loc[0]; k < loc[1]; k++ {
				if taken[k] {
					continue next
				}
			}
			for k := loc[0]; k < loc[1]; k++ {
				taken[k] = true
			}
			spans = append(spans, span{loc[0], loc[1], f.pat(w[loc[0]:loc[1]])})
		}
	}
	if len(spans) == 0 {
		return "", false
	}
	// Sort spans by start (few per line: insertion sort).
	for i := 1; i < len(spans); i++ {
		for j := i; j > 0 && spans[j].from < spans[j-1].from; j-- {
			spans[j], spans[j-1] = spans[j-1], spans[j]
		}
	}
	var b strings.Builder
	at := 0
	for _, s := range spans {
		b.WriteString(regexp.QuoteMeta(w[at:s.from]))
		b.WriteString(s.pat)
		at = s.to
	}
	b.WriteString(regexp.QuoteMeta(w[at:]))
	return b.String(), true
}

// matchLines reports whether got matches the matchers.
func matchLines(ms []lineMatcher, got []string) bool {
	if len(ms) == 0 {
		return len(got) == 0
	}
	m := ms[0]
	if m.any {
		for i := 0; i <= len(got); i++ {
			if matchLines(ms[1:], got[i:]) {
				return true
			}
		}
		return false
	}
	if len(got) == 0 {
		return false
	}
	ok := got[0] == m.exact
	if m.re != nil {
		ok = m.re.MatchString(got[0])
	}
	return ok && matchLines(ms[1:], got[1:])
}

// splitOutput splits a command's output into lines; a final newline ends
// the last line rather than starting an empty one, and a carriage return
// before a newline (HTTP headers) is dropped, as a terminal shows it.
func splitOutput(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines
}
