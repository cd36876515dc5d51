package namegroup

import (
	"fmt"
	"testing"
)

func TestGroup(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		name string
		want string
	}{
		{Config{Depth: 1}, "orders/eu/42", "orders/"},
		{Config{Depth: 2}, "orders/eu/42", "orders/eu/"},
		{Config{Depth: 2}, "orders", "orders"},
		{Config{Depth: 0}, "orders/eu/42", ""},
		{Config{Groups: []string{"orders/", "orders/eu/"}}, "orders/eu/42", "orders/eu/"},
		{Config{Groups: []string{"orders/", "orders/eu/"}}, "orders/us/1", "orders/"},
		{Config{Groups: []string{"orders/"}}, "billing/1", Other},
	} {
		g, err := New(tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := g.Group(tc.name); got != tc.want {
			t.Errorf("%+v: Group(%q) = %q, want %q", tc.cfg, tc.name, got, tc.want)
		}
	}
}

// TestGroup_Bounded attacks the cardinality bound: a flood of distinct
// prefixes yields at most MaxGroups groups plus Overflow.
func TestGroup_Bounded(t *testing.T) {
	g, _ := New(Config{Depth: 1, MaxGroups: 5})
	seen := map[string]bool{}
	for i := range 1000 {
		seen[g.Group(fmt.Sprintf("tenant%d/lock", i))] = true
	}
	if len(seen) != 6 || !seen[Overflow] {
		t.Fatalf("%d groups (%v), want 5 and %s", len(seen), seen, Overflow)
	}
	if got := g.Group("tenant0/other"); got != "tenant0/" {
		t.Fatalf("a group in use became %q", got)
	}
}

func TestConfig_Validate(t *testing.T) {
	for _, c := range []Config{{Depth: -1}, {MaxGroups: -1}, {Groups: []string{""}}, {Groups: []string{"a/", "a/"}}} {
		if _, err := New(c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}
