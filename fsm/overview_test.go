package fsm_test

import (
	"strings"
	"testing"
)

// The overview lists return the semaphores under a prefix sorted by name,
// skip (and count) what the reader may not see, and stop at the limit
// saying more follow.
func TestSemaphoresVisible_PrefixHiddenLimit(t *testing.T) {
	m := newMachine(t)
	sid := createSession(t, m)
	for i, n := range []string{"pool/b", "pool/a", "other/x", "pool/c"} {
		if res := semAcquire(m, sid, uint64(i+1), n, 2, 1, false); !res.Granted {
			t.Fatalf("acquire %s: %+v", n, res)
		}
	}
	names := func(limit int, visible func(string) bool) (string, int, bool) {
		out, hidden, more := m.SemaphoresVisible("pool/", visible, limit)
		var ns []string
		for _, s := range out {
			ns = append(ns, s.Name)
		}
		return strings.Join(ns, ","), hidden, more
	}
	if got, hidden, more := names(10, nil); got != "pool/a,pool/b,pool/c" || hidden != 0 || more {
		t.Fatalf("all: %q, %d hidden, more %v", got, hidden, more)
	}
	if got, _, more := names(2, nil); got != "pool/a,pool/b" || !more {
		t.Fatalf("limit 2: %q, more %v", got, more)
	}
	if got, hidden, _ := names(10, func(n string) bool { return n != "pool/b" }); got != "pool/a,pool/c" || hidden != 1 {
		t.Fatalf("pool/b hidden: %q, %d hidden", got, hidden)
	}
	if out, _, _ := m.RWLocksVisible("", nil, 10); len(out) != 0 {
		t.Fatalf("rwlocks: %+v, want none", out)
	}
	if out, _, _ := m.ElectionsVisible("", nil, 10); len(out) != 0 {
		t.Fatalf("elections: %+v, want none", out)
	}
}
