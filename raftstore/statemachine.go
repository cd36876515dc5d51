package raftstore

// StateMachine is the deterministic state a Node replicates: every member
// applies the same committed commands in the same order. The Node calls
// Apply, Snapshot and Restore from one goroutine at a time, never two at
// once; the state machine guards its state against its own readers.
type StateMachine interface {
	Codec

	// Apply applies committed commands, in order, and sets each one's
	// Result. It must be deterministic: the same commands applied to the
	// same state give the same state and results on every member. A
	// command the state machine refuses (a valid command whose request
	// cannot be granted) gets an error as its Result and changes nothing.
	//
	// Apply returns an error only when this member cannot go on applying
	// the log at all: a node-local write it must make before any result is
	// handed out failed. The node then stops (see Node.Err): the results
	// of cmds are not returned to their proposers, and nothing is applied
	// after them.
	Apply(cmds []Command) error

	// Snapshot returns the whole state, encoded. It must not change the
	// state.
	Snapshot() ([]byte, error)

	// Restore replaces the whole state with a snapshot Snapshot returned.
	// A snapshot a newer release wrote that this build does not apply
	// gives an error with a method NewerFormat reporting true (see
	// Codec.Decode).
	Restore(snapshot []byte) error
}

// Codec turns commands into Raft log entries and back. Commands proposed
// at the same moment share one entry (group commit); the codec decides how
// such a batch is encoded, and a command proposed alone is encoded alone.
type Codec interface {
	// Size returns the encoded size of cmd in bytes, which Propose counts
	// against the size limit of one entry.
	Size(cmd any) int

	// Encode encodes the commands proposed together as one entry. A single
	// command is encoded as itself.
	Encode(cmds []any) ([]byte, error)

	// Decode appends the commands of an entry Encode wrote to dst, in
	// order, and returns the extended slice. An entry it cannot decode
	// fully (garbled, or holding a command this version does not know)
	// must give an error: the node stops rather than skip it, since
	// skipping a committed command would make this member's state differ
	// from the others'. An entry a newer release wrote, which this build
	// does not apply, gives an error with a method NewerFormat reporting
	// true: the node stops with ErrNewerFormat instead of ErrDamaged.
	Decode(entry []byte, dst []any) ([]any, error)
}

// RoundTripCodec is a Codec that can vouch for the commands of an entry
// it just encoded: RoundTrips(cmds) true promises that Decode gives, for
// that entry, commands the StateMachine applies exactly as cmds, and that
// none of them is changed once proposed. The node that proposed such an
// entry then applies the very commands it was given while the entry is
// in flight, without decoding the entry (every other node, and this one
// after a restart or a failed proposal, decodes it). An entry it does not
// vouch for, and every entry of a codec without the method, is decoded
// on the proposer too: one that does not decode then stops it as well.
type RoundTripCodec interface {
	Codec
	// RoundTrips reports whether cmds, just encoded into one entry, are
	// what Decode gives back of it. It must not change them.
	RoundTrips(cmds []any) bool
}

// ResultPreparer is a StateMachine that works on the results of each
// entry its node proposed before they are handed out: PrepareResults gets
// the results of the entry's commands, in order, on the goroutine that
// committed the entry, before any of their proposers gets its own. It
// may change them (a server signs the grants among them with one
// signature); it runs on the proposing node only and is not part of the
// replicated state.
type ResultPreparer interface {
	StateMachine
	PrepareResults(results []any)
}

// Command is one committed command handed to StateMachine.Apply.
type Command struct {
	// Index is the Raft index of the entry holding the command; the
	// commands of one batch share it.
	Index uint64
	// Term is the term of the leader that proposed the entry.
	Term uint64
	// Cmd is the command as Codec.Decode returned it, or, on the node that
	// proposed it with a RoundTripCodec, the command given to Propose.
	Cmd any
	// Result is set by Apply and returned by Propose on the proposing
	// node.
	Result any
}
