package server

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"
)

// fakeClock is a settable clock for the session expiry table.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestSessionExpiry_DueOnlyAfterDeadlineAndRenewalsMoveIt(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	l := newSessionExpiry(clock)
	l.start(1, 3*time.Second)
	l.start(2, 5*time.Second)
	l.start(3, 3*time.Second)

	clock.advance(2 * time.Second)
	if got := l.due(); len(got) != 0 {
		t.Fatalf("due before any deadline: %v", got)
	}
	if _, ok := l.renew(1, 0); !ok {
		t.Fatal("renew of a live session failed")
	}
	l.end(3)

	clock.advance(1500 * time.Millisecond) // t=3.5s: 1 renewed to 5s, 3 ended
	if got := l.due(); len(got) != 0 {
		t.Fatalf("due at 3.5s = %v, want none (1 renewed, 3 ended)", got)
	}
	clock.advance(2 * time.Second) // t=5.5s
	got := l.due()
	slices.Sort(got)
	if !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("due at 5.5s = %v, want [1 2]", got)
	}
	if _, ok := l.renew(1, 0); ok {
		t.Fatal("a session whose expiry was proposed was renewed")
	}
	if got := l.due(); len(got) != 0 {
		t.Fatalf("expiry proposed again before retryExpiryAfter: %v", got)
	}
	clock.advance(retryExpiryAfter)
	got = l.due()
	slices.Sort(got)
	if !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("due after retryExpiryAfter = %v, want [1 2] again", got)
	}

	// A new leader restarts every TTL from now.
	l.restartAll()
	if _, ok := l.renew(2, 0); !ok {
		t.Fatal("renew after restartAll failed")
	}
	clock.advance(4 * time.Second)
	if got := l.due(); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("due 4s after restart = %v, want [1] (TTL 3s; 2 has 5s)", got)
	}
}

// BenchmarkLeasesDue measures the expiry scan with many live sessions,
// none due: it must not grow with the number of sessions.
func BenchmarkLeasesDue(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			l, _ := expiryOf(n, time.Minute)
			b.ReportAllocs()
			for b.Loop() {
				l.due()
			}
		})
	}
}

// TestSessionExpiry_EndedEntriesDoNotPileUp: entries that end long
// before their deadline (acked queue claims) leave the heap bounded by
// the live ones, and the live ones, renewed or not, still come due at
// their deadlines.
func TestSessionExpiry_EndedEntriesDoNotPileUp(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	l := newSessionExpiry(clock)
	l.start(1, 3*time.Second)
	l.start(2, 5*time.Second)
	for id := uint64(100); id < 100+20*compactExpiryAbove; id++ {
		l.start(id, 30*time.Second)
		l.end(id)
		if n := len(l.queue); n > 2*len(l.table)+compactExpiryAbove+1 {
			t.Fatalf("after ending %d: %d heap entries for %d live", id, n, len(l.table))
		}
	}
	if _, ok := l.renew(1, 0); !ok {
		t.Fatal("renew failed")
	}
	clock.advance(2 * time.Second)
	if _, ok := l.renew(1, 0); !ok { // 1 now due at 5 s
		t.Fatal("renew failed")
	}
	clock.advance(3500 * time.Millisecond) // t=5.5s
	got := l.due()
	slices.Sort(got)
	if !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("due at 5.5s = %v, want [1 2]", got)
	}
}

// expiryOf returns an expiry table on a fake clock tracking sessions 1 to
// n, each with ttl.
func expiryOf(n int, ttl time.Duration) (*sessionExpiry, *fakeClock) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	l := newSessionExpiry(clock)
	for i := range n {
		l.start(uint64(i+1), ttl)
	}
	return l, clock
}

// A TTL is kept in whole milliseconds, rounded up (never shorter), and at
// most the largest that fits.
func TestToTTLMs(t *testing.T) {
	for _, c := range []struct {
		in   time.Duration
		want time.Duration
	}{
		{time.Minute, time.Minute},
		{1500 * time.Microsecond, 2 * time.Millisecond},
		{24 * time.Hour, 24 * time.Hour},
		{1 << 62, math.MaxInt32 * time.Millisecond},
		{-time.Second, 0},
	} {
		if got := toTTLMs(c.in).duration(); got != c.want {
			t.Errorf("toTTLMs(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}
