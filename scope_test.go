package fence

import (
	"strings"
	"testing"
	"testing/quick"
)

func TestScopeCovers(t *testing.T) {
	for _, c := range []struct {
		scope, object string
		want          bool
	}{
		{"orders", "orders", true},
		{"orders", "orders/17", true},
		{"orders", "orders/17/lines", true},
		{"orders", "orders2", false},
		{"orders", "ord", false},
		{"ord", "orders", false},
		{"orders/17", "orders", false},
		{"orders/17", "orders/170", false},
		{"orders/17", "orders/17/a", true},
		{"orders", "orders-", false},
		{"orders", "Orders", false},
		{"", "orders", false},
		{"", "", false},
		{"orders", "", false},
		{"a/", "a/", true},
		{"a/", "a//b", true},
	} {
		if got := ScopeCovers(c.scope, c.object); got != c.want {
			t.Errorf("ScopeCovers(%q, %q) = %v, want %v", c.scope, c.object, got, c.want)
		}
	}
}

// TestScopeCoversProperty checks the rule against its definition over
// random names: scope covers object exactly when object is scope or
// scope+"/"+rest, and never covers a proper prefix of itself or a string
// that extends it without a separator.
func TestScopeCoversProperty(t *testing.T) {
	alphabet := "ab/"
	gen := func(r uint64, n int) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			b.WriteByte(alphabet[r%3])
			r /= 3
		}
		return b.String()
	}
	def := func(scope, object string) bool {
		if scope == "" {
			return false
		}
		if object == scope {
			return true
		}
		rest, ok := strings.CutPrefix(object, scope+"/")
		_ = rest
		return ok
	}
	f := func(a, b uint64, la, lb uint8) bool {
		scope, object := gen(a, int(la%6)), gen(b, int(lb%8))
		if ScopeCovers(scope, object) != def(scope, object) {
			t.Logf("scope %q object %q", scope, object)
			return false
		}
		// Extending the scope with a non-separator never covers more.
		if ScopeCovers(scope+"x", scope) || (scope != "" && ScopeCovers(scope, scope+"x")) {
			return false
		}
		// A proper prefix of the scope is never covered.
		if len(scope) > 1 && ScopeCovers(scope, scope[:len(scope)-1]) {
			return false
		}
		// The scope covers itself and every child.
		return scope == "" || (ScopeCovers(scope, scope) && ScopeCovers(scope, scope+"/"+object))
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 20000}); err != nil {
		t.Fatal(err)
	}
}
