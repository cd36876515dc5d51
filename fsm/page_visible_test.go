package fsm_test

import (
	"strings"
	"testing"
)

// A reader who may see only some names gets full pages of what it may
// see; the hidden counts of a walk's pages add up to everything it may
// not, and a page ends at a lock it shows.
func TestLocksVisible_PagesAddUp(t *testing.T) {
	m := newMachine(t)
	sid := createSession(t, m)
	names := []string{"a/1", "b/1", "b/2", "a/2", "c/1", "a/3", "b/3"}
	for _, n := range names {
		if res := acquire(m, sid, 0, n, false); !res.Granted {
			t.Fatalf("acquire %s: %+v", n, res)
		}
	}
	visible := func(n string) bool { return strings.HasPrefix(n, "a/") }
	for _, limit := range []int{1, 2, 3, 10} {
		var got []string
		hidden, after := 0, ""
		for pages := 0; ; pages++ {
			if pages > len(names) {
				t.Fatalf("limit %d: the walk does not end", limit)
			}
			locks, h, more := m.LocksVisible("", after, visible, limit)
			hidden += h
			for _, l := range locks {
				got = append(got, l.Name)
			}
			if !more {
				break
			}
			if len(locks) != limit {
				t.Fatalf("limit %d: a page of %d before the last", limit, len(locks))
			}
			after = locks[len(locks)-1].Name
		}
		if strings.Join(got, ",") != "a/1,a/2,a/3" || hidden != 4 {
			t.Fatalf("limit %d: %v and %d hidden, want a/1,a/2,a/3 and 4 hidden", limit, got, hidden)
		}
	}
	sessions, hidden, _ := m.SessionsVisible(0, func(n string) bool { return n == "c/1" }, 10)
	if len(sessions) != 1 || strings.Join(sessions[0].Held, ",") != "c/1" || hidden != 0 {
		t.Fatalf("sessions seen by a reader of c/1: %+v, %d hidden; want the one session holding only c/1 shown", sessions, hidden)
	}
	if sessions, hidden, _ := m.SessionsVisible(0, func(string) bool { return false }, 10); len(sessions) != 0 || hidden != 1 {
		t.Fatalf("sessions seen by a reader of nothing: %+v, %d hidden", sessions, hidden)
	}
}
