package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/fenced-dev/fenced/raftstore"
)

// healthBody is the JSON /healthz answers.
type healthBody struct {
	// Status is "ok" or "failing".
	Status string `json:"status"`
	// Reason says in one line why the node is failing.
	Reason string `json:"reason,omitempty"`
	// Failing lists the kinds of write to the data dir whose last attempt
	// failed.
	Failing []diskFailureBody `json:"failing,omitempty"`
}

// diskFailureBody is a raftstore.DiskFailure in /healthz.
type diskFailureBody struct {
	Op    string    `json:"op"`
	Error string    `json:"error"`
	Since time.Time `json:"since"`
	Last  time.Time `json:"last"`
	Count uint64    `json:"count"`
}

// healthz answers 200 {"status":"ok"} while the node can write its log,
// term and vote and snapshots, and 503 with the reason when the last
// attempt of one of them failed or the node gave up on its disk.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	h := s.node.DiskHealth()
	w.Header().Set("Content-Type", "application/json")
	if h.OK() {
		json.NewEncoder(w).Encode(healthBody{Status: "ok"})
		return
	}
	body := healthBody{Status: "failing", Reason: diskReason(h)}
	for _, f := range h.Failing {
		body.Failing = append(body.Failing, diskFailureBody{Op: f.Op, Error: f.Err.Error(), Since: f.Since, Last: f.Last, Count: f.Count})
	}
	w.WriteHeader(http.StatusServiceUnavailable)
	json.NewEncoder(w).Encode(body)
}

// diskReason says in one line why h is not OK.
func diskReason(h raftstore.DiskHealth) string {
	if h.Stalled != nil {
		return h.Stalled.Error()
	}
	parts := make([]string, len(h.Failing))
	for i, f := range h.Failing {
		parts[i] = fmt.Sprintf("%s failing since %s: %v", f.Op, f.Since.UTC().Format(time.RFC3339), f.Err)
	}
	return "cannot write to the data dir: " + strings.Join(parts, "; ")
}

// Failed returns a channel closed when the server cannot go on and its
// process should exit so that a supervisor restarts it: writes to the
// Raft log (or term and vote) failed for raftstore.Config.DiskStallTimeout
// without a success. Err says why.
func (s *Server) Failed() <-chan struct{} { return s.node.DiskStalled() }
