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
	mu       sync.Mutex
	subs     map[chan struct{}]struct{}
	timeline []timelineEvent // oldest first, at most uiTimelineLen
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
func (f *uiFeed) record(e timelineEvent) {
	f.mu.Lock()
	f.seq++
	e.Seq, e.AtMs = f.seq, time.Now().UnixMilli()
	if len(f.timeline) == uiTimelineLen {
		copy(f.timeline, f.timeline[1:])
		f.timeline = f.timeline[:uiTimelineLen-1]
	}
	f.timeline = append(f.timeline, e)
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
	for _, e := range f.timeline {
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
