package checker

import "github.com/fenced-dev/fenced/check/history"

// Violation is one failed check, with the operations involved.
type Violation struct {
	// Check names the checker: stale-write, token-order, mutual-exclusion,
	// linearizability, lost-ack, liveness, ownership.
	Check string `json:"check"`
	// Message says what is wrong.
	Message string `json:"message"`
	// Ops are the operations involved.
	Ops []history.Op `json:"ops"`
}
