package fsm_test

import (
	"strings"
	"testing"

	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
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

// A session's info lists what it holds and waits for in every primitive,
// not only locks, and a reader who may see only some names sees only
// those of them.
func TestSessionInfo_ListsEveryPrimitive(t *testing.T) {
	m := newMachine(t)
	a, b := createSession(t, m), createSession(t, m)
	if res := semAcquire(m, a, 1, "pool", 1, 1, false); !res.Granted {
		t.Fatalf("semaphore: %+v", res)
	}
	if res := semAcquire(m, b, 1, "pool", 1, 1, true); !res.Queued {
		t.Fatalf("semaphore waiter: %+v", res)
	}
	campaign(m, a, 2, "e", "")
	campaign(m, b, 2, "e", "")
	if res := rwAcquire(m, a, 3, "doc", false, false); !res.Granted {
		t.Fatalf("read lock: %+v", res)
	}
	push(m, 1, &statev1.QueuePush{Queue: "jobs", Payload: []byte("x")})
	c := claimQ(m, 1, a, 4, "jobs", 1000, false)
	if c.Queue.Claim.Item == 0 {
		t.Fatalf("claim: %+v", c)
	}
	acquire(m, a, 5, "orders", false)
	info, _ := m.Session(a)
	held, waiting := info.Shown()
	claim := fsm.ClaimScope("jobs", c.Queue.Claim.Item)
	if got, want := strings.Join(held, ","), "orders,semaphore:pool,election:e,rwlock:doc,queue:"+claim; got != want || len(waiting) != 0 {
		t.Fatalf("session a holds %q, waits %v; want %q and nothing", got, waiting, want)
	}
	info, _ = m.Session(b)
	if held, waiting := info.Shown(); len(held) != 0 || strings.Join(waiting, ",") != "semaphore:pool,election:e" {
		t.Fatalf("session b holds %v, waits %v; want nothing and semaphore:pool,election:e", held, waiting)
	}
	sessions, hidden, _ := m.SessionsVisible(0, func(n string) bool { return n == "pool" }, 10)
	if len(sessions) != 2 || hidden != 0 || len(sessions[0].Others) != 1 || sessions[0].Held != nil {
		t.Fatalf("sessions seen by a reader of pool: %+v, %d hidden; want both, with only pool", sessions, hidden)
	}
	if sessions, hidden, _ := m.SessionsVisible(0, func(n string) bool { return n == "doc" }, 10); len(sessions) != 1 || hidden != 1 {
		t.Fatalf("sessions seen by a reader of doc: %+v, %d hidden; want a shown, b hidden", sessions, hidden)
	}
}
