package server

import (
	"strings"
	"sync"
	"time"
)

// uiTimelineLen is how many grant events the dashboard's timeline keeps
// (per node, in memory).
const uiTimelineLen = 256

// uiFeed tells the dashboard's event streams that the state changed, and
// keeps the recent grants, releases and expiries for its timeline. The
// state machine's observer feeds it inside Apply: nothing here blocks.
type uiFeed struct {
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
	// timeline is a ring of the last uiTimelineLen events: the oldest
	// at (next-n) mod uiTimelineLen, n of them. A ring, not a slice
	// shifted down by one per event: a node applying a batch of queue
	// claims records two events per item, and moving 256 events each
	// time was 7 % of a follower's CPU (a profile of the queue batch
	// benchmark).
	timeline [uiTimelineLen]timelineEvent
	next, n  int
	seq      uint64
}

// timelineEvent is one entry of the dashboard's timeline.
type timelineEvent struct {
	Seq     uint64 `json:"seq"`
	AtMs    int64  `json:"at_ms"`
	Event   string `json:"event"` // grant, release, expiry
	Kind    string `json:"kind,omitempty"`
	Name    string `json:"name,omitempty"`
	Session uint64 `json:"session"`
	Token   uint64 `json:"token,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

func newUIFeed() *uiFeed { return &uiFeed{subs: make(map[chan struct{}]struct{})} }

// record appends e to the timeline and wakes the streams.
func (f *uiFeed) record(e timelineEvent, at time.Time) {
	f.mu.Lock()
	f.seq++
	e.Seq, e.AtMs = f.seq, at.UnixMilli()
	f.timeline[f.next] = e
	f.next = (f.next + 1) % uiTimelineLen
	f.n = min(f.n+1, uiTimelineLen)
	f.wakeLocked()
	f.mu.Unlock()
}

// changed wakes the streams.
func (f *uiFeed) changed() {
	f.mu.Lock()
	f.wakeLocked()
	f.mu.Unlock()
}

func (f *uiFeed) wakeLocked() {
	for ch := range f.subs {
		select {
		case ch <- struct{}{}:
		default: // already woken
		}
	}
}

// subscribe returns a channel woken (coalesced) after each change, and the
// function that ends the subscription.
func (f *uiFeed) subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	f.mu.Lock()
	f.subs[ch] = struct{}{}
	f.mu.Unlock()
	return ch, func() {
		f.mu.Lock()
		delete(f.subs, ch)
		f.mu.Unlock()
	}
}

// since returns the timeline entries after seq whose names start with
// prefix and that visible accepts (nil: all; an expiry names no object and
// is shown only with neither a prefix nor a filter), and the newest seq.
func (f *uiFeed) since(seq uint64, prefix string, visible func(string) bool) ([]timelineEvent, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []timelineEvent
	for i := range f.n {
		e := f.timeline[(f.next-f.n+i+uiTimelineLen)%uiTimelineLen]
		if e.Seq <= seq {
			continue
		}
		if e.Name == "" && (prefix != "" || visible != nil) {
			continue
		}
		if e.Name != "" && (!strings.HasPrefix(e.Name, prefix) || visible != nil && !visible(e.Name)) {
			continue
		}
		out = append(out, e)
	}
	return out, f.seq
}
