package readmetest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fenced-dev/fenced/internal/proctest"
)

// page parses a Markdown page written for a test.
func page(t *testing.T, text string) []section {
	t.Helper()
	path := filepath.Join(t.TempDir(), "page.md")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	blocks, err := parseFile(path, "page.md")
	if err != nil {
		t.Fatal(err)
	}
	var secs []section
	for _, b := range blocks {
		if n := len(secs); n > 0 && secs[n-1].title == b.section {
			secs[n-1].blocks = append(secs[n-1].blocks, b)
			continue
		}
		secs = append(secs, section{file: b.file, title: b.section, blocks: []block{b}})
	}
	return secs
}

// TestRunSection_BrokenStepFails edits a working page the ways a careless
// edit would and checks each edit fails with the page's line, the command
// and what was wanted and got.
func TestRunSection_BrokenStepFails(t *testing.T) {
	bin := proctest.Binary(t)
	const good = "## A\n\n<!-- readme-test: no-server -->\n```sh\n$ X=1; echo \"x is $X\"\nx is 1\n$ printf 'no newline'\nno newline\n$ false; echo \"exit $?\"\nexit 1\n$ ./fenced acquire a --endpoints 127.0.0.1 ; echo \"exit $?\"\n...\nexit 2\n```\n"
	for _, tc := range []struct {
		name, from, to string
		want           []string
	}{
		{"ok", "", "", nil},
		{"wrong output", "x is 1", "x is 2", []string{"page.md:5", "$ X=1", "want:\n    x is 2", "got:\n    x is 1"}},
		{"missing output line", "no newline\n", "", []string{"page.md:7", "got:\n    no newline"}},
		{"a failing command", "false; echo \"exit $?\"\nexit 1", "false", []string{"page.md:9", "exited 1"}},
		{"a hanging command", "printf 'no newline'", "sleep 30; printf 'no newline'", []string{"page.md:7", "did not finish within 1s"}},
		{"a variable from an earlier step", "X=1; echo", "echo", []string{"got:\n    x is \n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Replace(good, tc.from, tc.to, 1)
			text = strings.Replace(text, "no-server", "no-server timeout=1s vary=...", 1)
			secs := page(t, text)
			err := runSection(t, bin, secs[0])
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("the broken page passed")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestRunSection_SharesShellAndServer checks that the blocks of a section
// share variables and the section's server, and that a new section starts
// afresh.
func TestRunSection_SharesShellAndServer(t *testing.T) {
	bin := proctest.Binary(t)
	secs := page(t, "## A\n\n<!-- readme-test: vary=hex -->\n```sh\n$ export Y=2\n$ ./fenced acquire a --ttl 5s\na: granted token 1 (issuer 0123456789abcdef, session 1, ttl 5s)\n```\n\n```sh\n$ echo $Y; ls\n2\nfenced\n$ ./fenced acquire b --ttl 5s --json | grep -o '\"token\":\"[0-9]*\"'\n\"token\":\"2\"\n```\n\n## B\n\n```sh\n$ echo \"[$Y]\"; ./fenced acquire a --ttl 5s --wait 0s | cut -d' ' -f1-4\n[]\na: granted token 1\n```\n")
	if len(secs) != 2 {
		t.Fatalf("got %d sections, want 2", len(secs))
	}
	for _, s := range secs {
		if err := runSection(t, bin, s); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMatch_Forms(t *testing.T) {
	for _, tc := range []struct {
		want, got string
		vary      string
		ok        bool
	}{
		{"token 1 (issuer 4f1c0a9e2b7d6c35)", "token 1 (issuer 99990a9e2b7d6c35)", "hex", true},
		{"token 1 (issuer 4f1c0a9e2b7d6c35)", "token 2 (issuer 99990a9e2b7d6c35)", "hex", false},
		{"token 1 (issuer 4f1c0a9e2b7d6c35)", "token 1 (issuer 99990a9e2b7d6c3)", "hex", false},
		{"token 1 (issuer 4f1c0a9e2b7d6c35)", "token 1 (issuer 99990a9e2b7d6c35)", "", false},
		{"token 1", "token 7", "num", true},
		{`{"time":"2026-11-30T23:48:53.54684039Z","x":1}`, `{"time":"2027-01-02T03:04:05.1Z","x":1}`, "time", true},
		{`{"time":"2026-11-30T23:48:53.54684039Z","x":1}`, `{"time":"2027-01-02T03:04:05.1Z","x":2}`, "time", false},
		{"took 1.5s", "took 312ms", "dur", true},
		{"a ... b", "a anything at all b", "...", true},
		{"a ... b", "a anything at all c", "...", false},
		{"a (x", "a (x", "num", true}, // regexp characters are quoted
	} {
		vary := map[string]bool{}
		for _, f := range strings.Split(tc.vary, ",") {
			if f != "" {
				vary[f] = true
			}
		}
		if got := matchLines(compile([]string{tc.want}, vary), []string{tc.got}); got != tc.ok {
			t.Errorf("want %q got %q vary=%s: matched %v, want %v", tc.want, tc.got, tc.vary, got, tc.ok)
		}
	}
	// A carriage return before a newline is not part of the line.
	if got := splitOutput("HTTP/1.1 200 OK\r\nX: 1\r\n"); len(got) != 2 || got[0] != "HTTP/1.1 200 OK" || got[1] != "X: 1" {
		t.Errorf("splitOutput of CRLF lines: %q", got)
	}
	// "..." alone on a line stands for any number of lines.
	ms := compile([]string{"first", "...", "last"}, map[string]bool{"...": true})
	for _, got := range [][]string{{"first", "last"}, {"first", "x", "y", "last"}} {
		if !matchLines(ms, got) {
			t.Errorf("%q did not match first/.../last", got)
		}
	}
	if matchLines(ms, []string{"first", "x"}) {
		t.Error("first/x matched first/.../last")
	}
}

func TestParse_RefusesUnmarkedBareBlock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.md")
	os.WriteFile(path, []byte("## A\n```sh\ngo build ./...\n```\n"), 0o644)
	_, err := parseFile(path, "p.md")
	if err == nil || !strings.Contains(err.Error(), "p.md:3") || !strings.Contains(err.Error(), "skip=") {
		t.Fatalf("got %v, want an error at p.md:3 naming the skip marker", err)
	}
	os.WriteFile(path, []byte("<!-- readme-test: skip -->\n```sh\ngo build ./...\n```\n"), 0o644)
	if _, err := parseFile(path, "p.md"); err == nil || !strings.Contains(err.Error(), "reason") {
		t.Fatalf("a skip without a reason: got %v", err)
	}
}
