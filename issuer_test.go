package fence_test

import (
	"testing"

	fence "github.com/fenced-dev/fenced"
)

func TestIssuerEpoch(t *testing.T) {
	for _, c := range []struct {
		in, root string
		epoch    uint64
		next     string
	}{
		{"9f3a", "9f3a", 1, "9f3a.e2"},
		{"9f3a.e2", "9f3a", 2, "9f3a.e3"},
		{"9f3a.e10", "9f3a", 10, "9f3a.e11"},
		{"9f3a.e1", "9f3a.e1", 1, "9f3a.e1.e2"}, // epoch 1 is never written
		{"9f3a.e02", "9f3a.e02", 1, "9f3a.e02.e2"},
		{"9f3a.ex", "9f3a.ex", 1, "9f3a.ex.e2"},
		{".e3", ".e3", 1, ".e3.e2"},
	} {
		root, epoch := fence.IssuerEpoch(c.in)
		if root != c.root || epoch != c.epoch || fence.NextIssuerEpoch(c.in) != c.next {
			t.Errorf("%q: root %q epoch %d next %q, want %q %d %q", c.in, root, epoch, fence.NextIssuerEpoch(c.in), c.root, c.epoch, c.next)
		}
	}
}
