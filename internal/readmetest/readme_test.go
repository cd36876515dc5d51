package readmetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/fenced-dev/fenced/internal/proctest"
)

// repoRoot is the root of the source tree.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// pages returns README.md and docs/*.md, relative to the root.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(repoRoot(), "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, d := range docs {
		out = append(out, filepath.Join("docs", filepath.Base(d)))
	}
	return out
}

// A section is the blocks under one "## " heading of a page.
type section struct {
	file, title string
	blocks      []block
}

// startsOwnServers reports whether the section is marked no-server: its
// page starts servers itself, on fixed ports.
func (s section) startsOwnServers() bool {
	for _, b := range s.blocks {
		if b.marks.noServer {
			return true
		}
	}
	return false
}

// sections parses every page into its sections with runnable blocks.
func sections(t *testing.T) (secs []section, skipped []string) {
	t.Helper()
	for _, page := range pages(t) {
		blocks, err := parseFile(filepath.Join(repoRoot(), page), page)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			if b.marks.skip != "" {
				skipped = append(skipped, fmt.Sprintf("%s:%d: %s", b.file, b.line, b.marks.skip))
				continue
			}
			if n := len(secs); n > 0 && secs[n-1].file == b.file && (secs[n-1].title == b.section || b.marks.cont) {
				secs[n-1].blocks = append(secs[n-1].blocks, b)
				continue
			}
			secs = append(secs, section{file: b.file, title: b.section, blocks: []block{b}})
		}
	}
	return secs, skipped
}

// TestDocs_CommandsRunAsShown runs every ```sh block of README.md and
// docs/*.md and compares each command's output with the page.
func TestDocs_CommandsRunAsShown(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	secs, skipped := sections(t)
	for _, s := range skipped {
		t.Logf("not run (marked skip): %s", s)
	}
	bin := proctest.Binary(t)
	for _, sec := range secs {
		t.Run(sec.file+"#"+slug(sec.title), func(t *testing.T) {
			if !sec.startsOwnServers() {
				// Sections on free ports run side by side; those that start
				// servers on the ports their page names run one at a time.
				t.Parallel()
			}
			if err := runSection(t, bin, sec); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// runSection runs one section's blocks in one shell and returns the first
// step that did not go as the page shows.
func runSection(t *testing.T, bin string, sec section) error {
	var noServer, repoDir bool
	var serverFlags string
	for _, b := range sec.blocks {
		noServer = noServer || b.marks.noServer
		repoDir = repoDir || b.marks.repoDir
		if b.marks.server != "" {
			serverFlags = b.marks.server
		}
	}
	dir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(dir, "fenced")); err != nil {
		t.Fatal(err)
	}
	for _, b := range sec.blocks {
		for _, pkg := range b.marks.build {
			build := exec.Command("go", "build", "-o", filepath.Join(dir, filepath.Base(pkg)), pkg)
			build.Dir = repoRoot()
			if out, err := build.CombinedOutput(); err != nil {
				return fmt.Errorf("%s:%d: build=%s: %v\n%s", b.file, b.line, pkg, err, out)
			}
		}
	}
	for _, b := range sec.blocks {
		for _, path := range b.marks.copy {
			cp := exec.Command("cp", "-R", filepath.Join(repoRoot(), path), filepath.Join(dir, path))
			if out, err := cp.CombinedOutput(); err != nil {
				return fmt.Errorf("%s:%d: copy=%s: %v\n%s", b.file, b.line, path, err, out)
			}
		}
	}
	env := baseEnv(dir)
	var srv *proctest.Server
	if !noServer {
		srv = proctest.StartServer(t, strings.Fields(serverFlags)...)
		env = append(env, "FENCED_ENDPOINTS="+srv.Addr)
	}
	workDir := dir
	if repoDir {
		workDir = repoRoot()
	}
	sh, err := startShell(workDir, env, t.TempDir())
	if err != nil {
		return err
	}
	defer sh.close()
	for _, b := range sec.blocks {
		if missing := missingTools(b.marks.needs); missing != "" {
			// The blocks after it build on what it would have done.
			t.Logf("%s:%d and the rest of its section: not run: %s is not installed", b.file, b.line, missing)
			return nil
		}
		for _, st := range b.steps {
			res, err := sh.run(st.cmd, b.marks.timeout)
			where := fmt.Sprintf("%s:%d", b.file, st.line)
			if err != nil {
				return fmt.Errorf("%s: $ %s\n%v\noutput:\n%s", where, st.cmd, err, res.out)
			}
			if res.timeout {
				return fmt.Errorf("%s: $ %s\ndid not finish within %v (mark the block timeout=... if it must take longer)\noutput so far:\n%s%s", where, st.cmd, b.marks.timeout, res.out, serverLog(srv))
			}
			got := splitOutput(res.out)
			if !matchLines(compile(st.want, b.marks.vary), got) {
				return fmt.Errorf("%s: $ %s\nwant:\n%s\ngot:\n%s%s", where, st.cmd, indent(st.want), indent(got), varyHint(b))
			}
			if res.status != 0 {
				return fmt.Errorf("%s: $ %s\nexited %d (a page shows a failing command with `; echo \"exit $?\"`)\noutput:\n%s%s", where, st.cmd, res.status, indent(got), serverLog(srv))
			}
		}
	}
	return nil
}

// baseEnv is the environment of a section's shell: the machine's PATH and
// Go settings, a HOME of its own, no FENCED_ variables.
func baseEnv(home string) []string {
	env := []string{"HOME=" + home, "LC_ALL=C", "TERM=dumb", "TMPDIR=" + os.TempDir()}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "PATH" || strings.HasPrefix(k, "GO") {
			env = append(env, kv)
		}
	}
	// The go command's caches are under HOME by default: keep the
	// machine's, so that `go run` in a page does not download and build
	// everything again.
	return append(env, goEnv...)
}

// goEnv are the go command's cache settings, read once.
var goEnv = func() []string {
	out, err := exec.Command("go", "env", "GOPATH", "GOMODCACHE", "GOCACHE").Output()
	if err != nil {
		return nil
	}
	v := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(v) != 3 {
		return nil
	}
	return []string{"GOPATH=" + v[0], "GOMODCACHE=" + v[1], "GOCACHE=" + v[2], "GOFLAGS=-mod=mod"}
}()

func missingTools(tools []string) string {
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			return tool
		}
	}
	return ""
}

func serverLog(srv *proctest.Server) string {
	if srv == nil {
		return ""
	}
	return "\nthe section's server logged:\n" + srv.Log()
}

func varyHint(b block) string {
	if len(b.marks.vary) > 0 {
		return ""
	}
	return "\n(if only ids, issuers, secrets or times differ, mark the block <!-- readme-test: vary=hex,time,... --> as docs/contributing.md says)"
}

// indent shows lines for a failure message, quoted when they hold
// characters a terminal would not show.
func indent(lines []string) string {
	var sb strings.Builder
	for _, l := range lines {
		if strings.ContainsFunc(l, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
			l = strconv.Quote(l)
		}
		sb.WriteString("    " + l + "\n")
	}
	return sb.String()
}

// slug is a heading as a link fragment, as GitHub makes it.
func slug(title string) string {
	var sb strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			sb.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			sb.WriteRune(r)
		}
	}
	return sb.String()
}
