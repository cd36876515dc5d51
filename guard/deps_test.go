package guard_test

import (
	"go/build"
	"strings"
	"testing"
)

// TestDeps keeps package guard transport-independent: httpfence and
// grpcfence build on it, so neither it nor a package of this module it
// imports may import net/http or anything outside the standard library and
// this module (grpc, say).
func TestDeps(t *testing.T) {
	const module = "github.com/fenced-dev/fenced"
	seen := map[string]bool{}
	var walk func(path string, pkg *build.Package)
	walk = func(path string, pkg *build.Package) {
		for _, imp := range pkg.Imports {
			if seen[imp] {
				continue
			}
			seen[imp] = true
			first, _, _ := strings.Cut(imp, "/")
			switch {
			case imp == "net/http" || strings.HasPrefix(imp, "net/http/"):
				t.Errorf("%s imports %q; HTTP belongs in httpfence", path, imp)
			case imp == module || strings.HasPrefix(imp, module+"/"):
				dep, err := build.Import(imp, ".", 0)
				if err != nil {
					t.Fatalf("import %s: %v", imp, err)
				}
				walk(imp, dep)
			case strings.Contains(first, "."):
				t.Errorf("%s imports %q; only the standard library and this module are allowed", path, imp)
			}
		}
	}
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	walk(module+"/guard", pkg)
	if !seen[module] {
		t.Errorf("guard does not import %s; is the walk broken?", module)
	}
}
