package main

import (
	"strings"
	"testing"

	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// Names from the server that could hide or reorder text on a terminal are
// printed quoted, with their invisible characters escaped.
func TestShown(t *testing.T) {
	for in, want := range map[string]string{
		"orders":          "orders",
		"ünïcødé ✓":       "ünïcødé ✓",
		"":                "",
		"a\u202egpj.exe":  `"a\u202egpj.exe"`,
		"zero\u200bwidth": `"zero\u200bwidth"`,
		"line\nbreak":     `"line\nbreak"`,
		"esc\x1b[31mred":  `"esc\x1b[31mred"`,
		"bad\xffutf8":     `"bad\xffutf8"`,
		"sep\u2028arator": `"sep\u2028arator"`,
	} {
		if got := shown(in); got != want {
			t.Errorf("shown(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestPrintStatus_QuotesUnsafeNames(t *testing.T) {
	var b strings.Builder
	printStatus(&b, &fencedv1.StatusResponse{
		NodeId: "n1", Issuer: "c\u200b1",
		Locks:    []*fencedv1.LockInfo{{Name: "orders\u202e"}},
		Sessions: []*fencedv1.SessionInfo{{Session: 1, TtlMs: 1000, Held: []string{"x\u2066"}}},
	})
	out := b.String()
	for _, r := range []rune{'\u202e', '\u200b', '\u2066'} {
		if strings.ContainsRune(out, r) {
			t.Errorf("status output contains %U unescaped:\n%s", r, out)
		}
	}
	for _, want := range []string{`"orders\u202e"`, `"c\u200b1"`, `"x\u2066"`} {
		if !strings.Contains(out, want) {
			t.Errorf("status output lacks %s:\n%s", want, out)
		}
	}
}
