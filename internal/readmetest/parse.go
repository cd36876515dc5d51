// Package readmetest executes the documentation: every ```sh block of
// README.md and docs/*.md runs, and its transcript is compared with what
// the page shows. The format a page follows is described in
// docs/contributing.md ("Command examples are tests"); in short:
//
//   - a line starting with "$ " is a command (a line ending in "\" continues
//     it on the next line); the lines after it, up to the next command or
//     the end of the block, are what it prints (stdout and stderr as one
//     stream), compared exactly;
//   - every command must exit 0 (show a failure with `; echo "exit $?"`);
//   - the blocks of one section (a "# " or "## " heading) share a shell, a fresh
//     directory holding ./fenced and a fresh server (FENCED_ENDPOINTS points
//     at it);
//   - an HTML comment right above the fence changes that:
//     <!-- readme-test: skip="why it cannot run in CI" -->,
//     vary=hex,time,role,dur,num,... (parts matched by form), no-server,
//     continue (the block goes on in the shell of the section before, for a
//     page whose "## " subsections build on each other),
//     server="--flag ..." (flags for the section's server), dir=repo (run in
//     the repository, for `go run ./examples/...`), needs=jq,curl (skip when
//     a tool is missing), build=./PKG (built into the section's directory),
//     copy=deploy (repository paths copied into it), timeout=60s (per
//     command).
package readmetest

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"time"
)

// A block is one ```sh block of a page.
type block struct {
	file    string
	line    int    // line of the opening fence
	section string // the "## " heading it is under
	marks   marks
	steps   []step
}

// A step is one command of a block and the output the page shows for it.
type step struct {
	line int // line of the "$ " command
	cmd  string
	want []string
}

// marks are the settings of a readme-test comment.
type marks struct {
	skip     string // reason the block is not run
	vary     map[string]bool
	noServer bool          // the section starts no server
	cont     bool          // the block continues the section before it
	server   string        // extra flags for the section's server
	repoDir  bool          // the section runs in the repository root
	needs    []string      // tools that must be on PATH
	build    []string      // packages of the repository built into the section's directory
	copy     []string      // files or directories of the repository copied into the section's directory
	timeout  time.Duration // per command
}

// knownForms are the names vary= accepts.
var knownForms = map[string]bool{"hex": true, "time": true, "dur": true, "num": true, "role": true, "...": true}

const markPrefix = "<!-- readme-test:"

// parseFile reads the ```sh blocks of one Markdown file.
func parseFile(path, name string) ([]block, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var (
		blocks  []block
		section string
		pending []string // readme-test comments seen directly above
		cur     *block
		fence   string // the fence that opened a non-sh block being skipped
		n       int
	)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case fence != "":
			if closes(line, fence) {
				fence = ""
			}
		case cur != nil:
			if closes(line, "```") {
				if err := cur.finish(); err != nil {
					return nil, err
				}
				blocks = append(blocks, *cur)
				cur = nil
				continue
			}
			cur.addLine(n, line)
		case isFence(line):
			info := strings.TrimSpace(strings.TrimPrefix(line, "```"))
			if info == "sh" {
				m, err := parseMarks(pending)
				if err != nil {
					return nil, fmt.Errorf("%s:%d: %v", name, n, err)
				}
				cur = &block{file: name, line: n, section: section, marks: m}
			} else {
				fence = line[:len(line)-len(strings.TrimLeft(line, "`"))]
			}
			pending = nil
		case strings.HasPrefix(line, markPrefix):
			pending = append(pending, line)
		default:
			if strings.HasPrefix(line, "# ") || strings.HasPrefix(line, "## ") {
				section = strings.TrimSpace(strings.TrimLeft(line, "#"))
			}
			pending = nil
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: ```sh block is never closed", name, cur.line)
	}
	return blocks, nil
}

// isFence reports whether line opens a fenced code block: three or more
// backticks and an info string without backticks (CommonMark).
func isFence(line string) bool {
	if !strings.HasPrefix(line, "```") {
		return false
	}
	return !strings.Contains(strings.TrimLeft(line, "`"), "`")
}

// closes reports whether line closes a block opened by fence: a line of
// backticks only, at least as many.
func closes(line, fence string) bool {
	t := strings.TrimSpace(line)
	return len(t) >= len(fence) && strings.Trim(t, "`") == ""
}

// addLine adds one line of the block's body.
func (b *block) addLine(n int, line string) {
	if len(b.steps) > 0 {
		last := &b.steps[len(b.steps)-1]
		if len(last.want) == 0 && strings.HasSuffix(last.cmd, "\\") {
			last.cmd += "\n" + line
			return
		}
	}
	if cmd, ok := strings.CutPrefix(line, "$ "); ok {
		b.steps = append(b.steps, step{line: n, cmd: cmd})
		return
	}
	if len(b.steps) == 0 {
		b.steps = append(b.steps, step{line: n}) // reported by finish
	}
	last := &b.steps[len(b.steps)-1]
	last.want = append(last.want, line)
}

// finish checks the block's shape.
func (b *block) finish() error {
	if b.marks.skip != "" {
		return nil
	}
	if len(b.steps) == 0 {
		return fmt.Errorf("%s:%d: empty ```sh block", b.file, b.line)
	}
	if b.steps[0].cmd == "" {
		return fmt.Errorf("%s:%d: this ```sh block does not start with a \"$ \" command: write each command as \"$ cmd\" with its output below it, or mark the block <!-- readme-test: skip=\"reason\" --> (docs/contributing.md)", b.file, b.steps[0].line)
	}
	return nil
}

// parseMarks reads readme-test comments: space-separated key or key=value
// settings, a value in double quotes when it holds spaces.
func parseMarks(lines []string) (marks, error) {
	m := marks{vary: map[string]bool{}, timeout: 30 * time.Second}
	for _, line := range lines {
		body, ok := strings.CutSuffix(strings.TrimPrefix(line, markPrefix), "-->")
		if !ok {
			return m, fmt.Errorf("readme-test comment must end with --> on the same line: %q", line)
		}
		fields, err := splitFields(body)
		if err != nil {
			return m, err
		}
		for _, f := range fields {
			key, val, _ := strings.Cut(f, "=")
			switch key {
			case "skip":
				if strings.TrimSpace(val) == "" {
					return m, fmt.Errorf("skip needs a reason: skip=\"why this cannot run in CI\"")
				}
				m.skip = val
			case "vary":
				for _, form := range strings.Split(val, ",") {
					if !knownForms[form] {
						return m, fmt.Errorf("vary=%s: unknown form %q (want hex, time, role, dur, num or ...)", val, form)
					}
					m.vary[form] = true
				}
			case "no-server":
				m.noServer = true
			case "continue":
				m.cont = true
			case "server":
				m.server = val
			case "dir":
				if val != "repo" {
					return m, fmt.Errorf("dir=%s: only dir=repo is known", val)
				}
				m.repoDir = true
			case "needs":
				m.needs = append(m.needs, strings.Split(val, ",")...)
			case "build":
				for _, pkg := range strings.Split(val, ",") {
					if !strings.HasPrefix(pkg, "./") || strings.Contains(pkg, "..") {
						return m, fmt.Errorf("build=%s: want packages of the repository such as ./examples/signed-resource", val)
					}
					m.build = append(m.build, pkg)
				}
			case "copy":
				for _, path := range strings.Split(val, ",") {
					if path == "" || strings.HasPrefix(path, "/") || strings.Contains(path, "..") {
						return m, fmt.Errorf("copy=%s: want paths inside the repository such as deploy", val)
					}
					m.copy = append(m.copy, path)
				}
			case "timeout":
				d, err := time.ParseDuration(val)
				if err != nil || d <= 0 {
					return m, fmt.Errorf("timeout=%s: want a duration such as 60s", val)
				}
				m.timeout = d
			default:
				return m, fmt.Errorf("unknown readme-test setting %q (want skip, vary, no-server, continue, server, dir, needs, build, copy or timeout)", key)
			}
		}
	}
	return m, nil
}

// splitFields splits on spaces outside double quotes and drops the quotes.
func splitFields(s string) ([]string, error) {
	var (
		out   []string
		cur   strings.Builder
		quote bool
		any   bool
	)
	for _, r := range s {
		switch {
		case r == '"':
			quote = !quote
			any = true
		case r == ' ' && !quote:
			if any {
				out = append(out, cur.String())
			}
			cur.Reset()
			any = false
		default:
			cur.WriteRune(r)
			any = true
		}
	}
	if quote {
		return nil, fmt.Errorf("unbalanced quote in readme-test comment %q", s)
	}
	if any {
		out = append(out, cur.String())
	}
	return out, nil
}
