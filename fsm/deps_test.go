package fsm_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps keeps the state machine pure: it imports no package that does
// I/O, and no module but the protobuf runtime and this repository's root
// package and state proto, in the production and the test build.
func TestDeps(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	ioPackages := map[string]bool{"net": true, "os": true, "os/exec": true, "log": true, "log/slog": true, "io/ioutil": true, "syscall": true}
	allowed := func(path string) bool {
		return path == "github.com/fenced-dev/fenced" ||
			path == "github.com/fenced-dev/fenced/proto/fenced/state/v1" ||
			path == "google.golang.org/protobuf" || strings.HasPrefix(path, "google.golang.org/protobuf/")
	}
	for _, tags := range []string{"", "fencedfaults"} {
		list := func(args ...string) []string {
			t.Helper()
			out, err := exec.Command("go", append([]string{"list", "-tags", tags}, args...)...).Output()
			if err != nil {
				t.Fatalf("go list -tags %q %v: %v", tags, args, err)
			}
			return strings.Fields(string(out))
		}
		for _, imp := range list("-f", `{{join .Imports " "}}`, ".") {
			if ioPackages[imp] || strings.HasPrefix(imp, "net/") {
				t.Errorf("tags %q: package fsm imports %q, which does I/O", tags, imp)
			}
		}
		for _, dep := range list("-deps", "-f", `{{if not .Standard}}{{.ImportPath}}{{end}}`, ".") {
			if dep != "github.com/fenced-dev/fenced/fsm" && !allowed(dep) {
				t.Errorf("tags %q: package fsm depends on %q; only the protobuf runtime and this repository's root and state proto packages are allowed", tags, dep)
			}
		}
	}
}
