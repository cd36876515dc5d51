package server

import (
	"testing"
	"time"
)

func TestRateLimiter_RefillsAndForgets(t *testing.T) {
	now := time.Unix(1000, 0)
	r := newRateLimiter(2, 3, func() time.Time { return now })
	for i := range 3 {
		if !r.allow("a") {
			t.Fatalf("take %d within the burst refused", i)
		}
	}
	if r.allow("a") {
		t.Fatal("take beyond the burst allowed")
	}
	if !r.allow("b") {
		t.Fatal("another key shares a's bucket")
	}
	now = now.Add(500 * time.Millisecond) // one token at 2/s
	if !r.allow("a") || r.allow("a") {
		t.Fatal("want exactly one token after 0.5s at 2/s")
	}
	now = now.Add(time.Hour)
	r.dropFull(now)
	if len(r.buckets) != 0 {
		t.Fatalf("%d buckets kept after they refilled, want 0", len(r.buckets))
	}
	if off := newRateLimiter(0, 0, time.Now); !off.allow("a") || !off.allow("a") {
		t.Fatal("rate 0 limits")
	}
}
