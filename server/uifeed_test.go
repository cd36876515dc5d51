package server

import (
	"testing"
	"time"
)

// TestUIFeed_TimelineKeepsTheNewestInOrder fills the timeline past its
// length: since returns the newest uiTimelineLen events, oldest first,
// and only those after the seq asked for.
func TestUIFeed_TimelineKeepsTheNewestInOrder(t *testing.T) {
	f := newUIFeed()
	total := uiTimelineLen + 44
	for range total {
		f.record(timelineEvent{Event: "grant", Name: "n"}, time.Now())
	}
	out, last := f.since(0, "", nil)
	if last != uint64(total) || len(out) != uiTimelineLen {
		t.Fatalf("since(0): %d events, newest seq %d; want %d, %d", len(out), last, uiTimelineLen, total)
	}
	for i, e := range out {
		if want := uint64(total - uiTimelineLen + i + 1); e.Seq != want {
			t.Fatalf("event %d has seq %d, want %d", i, e.Seq, want)
		}
	}
	if out, _ := f.since(uint64(total-3), "", nil); len(out) != 3 || out[0].Seq != uint64(total-2) {
		t.Fatalf("since(%d): %+v, want the last 3", total-3, out)
	}
}
