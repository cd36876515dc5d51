package fsm

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// A nameSet answers as a map of the same names does, through any run of
// adds and removes that crosses from slice to map and back, and walks its
// names in order.
func TestNameSet_AsMap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var s *nameSet
		want := map[string]struct{}{}
		// Few enough distinct names that removes hit, enough to go big;
		// and the empty name, which a set of one never keeps inline.
		name := rapid.Custom(func(t *rapid.T) string {
			i := rapid.IntRange(-1, 3*smallSet).Draw(t, "i")
			if i < 0 {
				return ""
			}
			return fmt.Sprintf("n%02d", i)
		})
		for range rapid.IntRange(0, 400).Draw(t, "ops") {
			n := name.Draw(t, "name")
			_, had := want[n]
			if rapid.Bool().Draw(t, "add") {
				if s == nil {
					s = &nameSet{}
				}
				if got := s.add(n); got == had {
					t.Fatalf("add(%s) = %v with the name there: %v", n, got, had)
				}
				want[n] = struct{}{}
			} else {
				if got := s != nil && s.remove(n); got != had {
					t.Fatalf("remove(%s) = %v with the name there: %v", n, got, had)
				}
				delete(want, n)
			}
			if s.len() != len(want) {
				t.Fatalf("len = %d, want %d", s.len(), len(want))
			}
			if s.has(n) != (func() bool { _, ok := want[n]; return ok })() {
				t.Fatalf("has(%s) disagrees with the map", n)
			}
			if s != nil && s.more != nil && s.more.big != nil && len(s.more.big) <= smallSet/2 {
				t.Fatalf("a set of %d names stayed a map", len(s.more.big))
			}
			if s != nil && s.more != nil && s.more.big == nil && len(s.more.list) > smallSet {
				t.Fatalf("a set of %d names is a slice", len(s.more.list))
			}
			if s != nil && s.more != nil && s.one != "" {
				t.Fatalf("a set keeps %q inline beside its slice or map", s.one)
			}
		}
		keys := sortedKeys(want)
		if got := s.sorted(); !slices.Equal(got, keys) {
			t.Fatalf("sorted() = %v, want %v", got, keys)
		}
		if got := slices.Collect(s.all()); !slices.Equal(got, keys) && !(len(got) == 0 && len(keys) == 0) {
			t.Fatalf("all() = %v, want %v", got, keys)
		}
	})
}
