package raftstore

import "errors"

// Errors returned by Node. Check them with errors.Is. A write a follower
// rejects wraps fence.ErrNotLeader instead; it was not applied.
var (
	// ErrShutdown reports a call on a node that is shut down or shutting
	// down. Alone it means the command was not proposed; together with
	// ErrOutcomeUnknown it means the command was proposed and its fate is
	// not known.
	ErrShutdown = errors.New("raftstore: node is shut down")

	// ErrOutcomeUnknown reports a command that was handed to Raft but whose
	// commit this node could not observe: leadership was lost, the node shut
	// down, or the caller's context ended first. The command may or may not
	// have been applied, now or later (a new leader may still commit it).
	// The wrapped errors say why; retry only with a request the state
	// machine de-duplicates.
	ErrOutcomeUnknown = errors.New("raftstore: outcome unknown")

	// ErrDataDirInUse reports a data dir locked by another process (or by
	// another Node of this process).
	ErrDataDirInUse = errors.New("raftstore: data dir in use")
)

// ErrDamaged reports a log entry or snapshot this node cannot read back as
// it was written: it fails its checksum, or does not decode. The node
// refuses to start on it, or stops (see Node.Err); it never skips the
// entry. The wrapping error names the file and the entry's index.
var ErrDamaged = errors.New("raftstore: log or snapshot damaged")

// ErrNewerFormat reports a log entry or snapshot a newer release wrote that
// this build does not apply: the state machine refused it with an error
// that has a method NewerFormat reporting true (fsm.ErrFormatVersion
// does: a newer format version, or a field, kind or value this build does
// not know). The node stops, as on ErrDamaged, and never skips the entry
// or applies it without what it does not know; the cure is to upgrade the
// node and start it again (docs/operations.md, "Upgrades").
var ErrNewerFormat = errors.New("raftstore: written by a newer release")

// newerFormat reports whether the state machine's err says a newer
// release wrote what it refused.
func newerFormat(err error) bool {
	var nf interface{ NewerFormat() bool }
	return errors.As(err, &nf) && nf.NewerFormat()
}
