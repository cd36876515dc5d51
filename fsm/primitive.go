package fsm

import (
	fence "github.com/fenced-dev/fenced"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// section is one part of the state in the snapshot: it writes its fields
// of State and restores them. Sessions are restored before every section,
// so a section can bind its objects to them.
type section interface {
	snapshot(st *statev1.State)
	restore(st *statev1.State) error
}

// primitive is a coordination primitive whose grants hang off sessions
// (the exclusive lock, the semaphore). Besides its snapshot section it releases
// what a session holds, and takes it out of every queue, when the session
// ends.
type primitive interface {
	section
	// endSession releases every object s holds in this primitive and takes
	// s out of every queue, promoting waiters (binding.end gives the
	// order). The Machine deletes the session afterwards.
	endSession(s *session, reason EndReason, now int64)
	// eachGrant calls fn for every grant the primitive holds, with its
	// token: restore rebuilds the live-grant index from it and
	// checkInvariants compares the index with it (livegrants.go).
	eachGrant(fn func(tok fence.Token, g liveGrant))
}
