package server

import (
	"slices"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
)

// A retime to a shorter TTL makes the session due by it, once: the entry
// queued for the old deadline is dropped, not proposed again.
func TestSessionExpiry_RetimeShorter(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	l := newSessionExpiry(clock)
	l.start(1, time.Hour)
	for range 3 {
		l.retime(1, time.Hour)
		l.retime(1, 2*time.Second)
	}
	clock.advance(time.Second)
	if got := l.due(); len(got) != 0 {
		t.Fatalf("due at 1s = %v, want none", got)
	}
	clock.advance(1500 * time.Millisecond)
	if got := l.due(); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("due at 2.5s = %v, want [1]", got)
	}
	clock.advance(2 * time.Hour)
	if got := l.due(); !slices.Equal(got, []uint64{1}) { // the retry, not one per retime
		t.Fatalf("due later = %v, want [1] once", got)
	}
	// The entries of the old deadlines are gone, not queued again for good.
	if n := len(l.queue); n != 1 {
		t.Fatalf("%d heap entries for one session, want 1", n)
	}
}

// A pinned session is never proposed for expiry; pinning one whose expiry
// was proposed fails.
func TestSessionExpiry_Pin(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	l := newSessionExpiry(clock)
	l.start(1, time.Second)
	l.start(2, time.Second)
	if !l.pin(1) {
		t.Fatal("pin of a live session failed")
	}
	clock.advance(2 * time.Second)
	if got := l.due(); !slices.Equal(got, []uint64{2}) {
		t.Fatalf("due = %v, want only the unpinned 2", got)
	}
	if l.pin(2) {
		t.Fatal("pin of a session whose expiry was proposed succeeded")
	}
	l.end(2)
	l.retime(1, time.Second) // the renewal applied
	l.unpin(1)
	clock.advance(500 * time.Millisecond)
	if got := l.due(); len(got) != 0 {
		t.Fatalf("due right after the renewal = %v, want none", got)
	}
	clock.advance(time.Second)
	if got := l.due(); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("due a TTL after the renewal = %v, want [1]", got)
	}
}

// Delays are due by their length, each proposed once until the retry
// interval, and a reset arms them in full from now.
func TestLockDelays_Due(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	d := newLockDelays(clock)
	d.start("b", 7, 2*time.Second)
	d.start("a", 5, time.Second)
	clock.advance(1500 * time.Millisecond)
	if got := d.due(); len(got) != 1 || got[0].Name != "a" || got[0].After != 5 {
		t.Fatalf("due at 1.5s = %v, want a after 5", got)
	}
	if got := d.due(); len(got) != 0 {
		t.Fatalf("due again = %v, want none until the retry", got)
	}
	d.ended("a", 4) // another delay's end changes nothing
	d.reset([]fsm.PendingDelay{{Name: "a", After: fence.Token(5), Length: time.Second}, {Name: "b", After: 7, Length: 2 * time.Second}})
	clock.advance(1500 * time.Millisecond)
	if got := d.due(); len(got) != 1 || got[0].Name != "a" {
		t.Fatalf("due 1.5s after a reset = %v, want only a (b re-armed in full)", got)
	}
	d.ended("b", 7)
	clock.advance(time.Hour)
	if got := d.due(); len(got) != 1 || got[0].Name != "a" {
		t.Fatalf("due an hour later = %v, want a's retry only", got)
	}
}
