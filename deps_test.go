package fence_test

import (
	"go/build"
	"strings"
	"testing"
)

// TestDeps keeps the root package free of dependencies: it holds the domain
// types every other package and every user imports, so it may import only
// the standard library.
func TestDeps(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		if first, _, _ := strings.Cut(imp, "/"); strings.Contains(first, ".") {
			t.Errorf("package fence imports %q; only the standard library is allowed", imp)
		}
	}
}
