package server

import (
	"encoding/json"
	"io"
	"sync"
	"time"
)

// TestKnobs are hooks for the fault harness (`fenced check`). EventLog only
// observes and exists in every build. The embedded Faults break promises on
// purpose (the harness's faults and negative controls); their fields exist
// only in a test build (build tag fencedfaults), so a production build
// cannot turn them on. A server with a fault on logs a WARN line at start.
type TestKnobs struct {
	// EventLog, when set, receives the committed history as this node
	// applies it: one JSON object per grant, release and session expiry,
	// with the Raft index it was applied at (field "seq"), and for a grant
	// or release the grant's kind (field "grant_kind"), for a grant its
	// scope.
	EventLog io.Writer
	Faults
}

// eventLog writes committed events as JSON lines.
type eventLog struct {
	mu  sync.Mutex
	enc *json.Encoder
}

// committedEvent is one line of the event log, in the field names of the
// fault harness's history (package check).
type committedEvent struct {
	Kind      string `json:"kind"`
	Name      string `json:"name,omitempty"`
	GrantKind string `json:"grant_kind,omitempty"`
	Scope     string `json:"scope,omitempty"`
	Session   uint64 `json:"session,omitempty"`
	Token     uint64 `json:"token,omitempty"`
	Seq       uint64 `json:"seq"`
	Invoke    int64  `json:"invoke"`
	Result    string `json:"result,omitempty"`
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
