package server

import (
	"encoding/json"
	"io"
	"sync"
	"time"

	fence "github.com/fenced-dev/fenced"
)

// TestKnobs are faults for the fault harness (`fenced check`) and its
// negative controls. Each one breaks a promise on purpose; none is for
// production use.
type TestKnobs struct {
	// EventLog, when set, receives the committed history as this node
	// applies it: one JSON object per grant, release and session expiry,
	// with the Raft index it was applied at (field "seq").
	EventLog io.Writer
	// ClockRate runs the leader's lease clock fast (>1) or slow (<1): a
	// server whose clock misbehaves. 0 means 1.
	ClockRate float64
	// UnfencedKV makes the kv accept every write, stale or not (the
	// negative control of the stale-write checker).
	UnfencedKV bool
	// ResetTokens makes every new leader reset the token counter to 0 (the
	// negative control of the token-order checker).
	ResetTokens bool
}

// scaledClock is a fence.Clock running at rate times real time.
type scaledClock struct {
	start time.Time
	rate  float64
}

func (c scaledClock) Now() time.Time {
	return c.start.Add(time.Duration(float64(time.Since(c.start)) * c.rate))
}

func (k TestKnobs) clock() fence.Clock {
	if k.ClockRate == 0 || k.ClockRate == 1 {
		return fence.SystemClock{}
	}
	return scaledClock{start: time.Now(), rate: k.ClockRate}
}

// eventLog writes committed events as JSON lines.
type eventLog struct {
	mu  sync.Mutex
	enc *json.Encoder
}

// committedEvent is one line of the event log, in the field names of the
// fault harness's history (package check).
type committedEvent struct {
	Kind    string `json:"kind"`
	Name    string `json:"name,omitempty"`
	Session uint64 `json:"session,omitempty"`
	Token   uint64 `json:"token,omitempty"`
	Seq     uint64 `json:"seq"`
	Invoke  int64  `json:"invoke"`
	Result  string `json:"result,omitempty"`
}

func (l *eventLog) write(e committedEvent) {
	if l == nil {
		return
	}
	e.Invoke = time.Now().UnixNano()
	l.mu.Lock()
	l.enc.Encode(e)
	l.mu.Unlock()
}
