package raftstore

import (
	"fmt"
	"io"

	"github.com/hashicorp/raft"
)

// fsmAdapter is the raft.BatchingFSM a Node gives hashicorp/raft: it
// decodes each entry into its commands with the StateMachine's codec,
// applies all the commands raft hands over at once in one StateMachine.Apply
// call, and answers each entry with its result (one command) or its
// batchResults (several). It then publishes the index applied.
//
// Raft calls it from its FSM goroutine only, so the scratch slices need no
// lock.
type fsmAdapter struct {
	sm      StateMachine
	applied appliedIndex

	decoded []any     // scratch: the commands of the entries being applied
	cmds    []Command // scratch: the same with their index and term
	spans   []span    // scratch: which commands each entry holds
}

var _ raft.BatchingFSM = (*fsmAdapter)(nil)

// span is the run of commands one entry decoded into, or why it did not.
type span struct {
	start, n int
	err      error
}

// batchResults is an entry's response when it holds several commands: one
// result per command, in order.
type batchResults []any

// entryError is an entry's response when it could not be decoded.
type entryError struct{ err error }

// Apply implements raft.FSM. Raft calls ApplyBatch instead; this is for
// completeness.
func (a *fsmAdapter) Apply(l *raft.Log) any {
	return a.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch implements raft.BatchingFSM. Raft hands over command and
// configuration entries; only commands reach the state machine, but both
// count as applied.
func (a *fsmAdapter) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	decoded, spans := a.decoded[:0], a.spans[:0]
	for _, l := range logs {
		sp := span{start: len(decoded)}
		if l.Type == raft.LogCommand {
			var err error
			if decoded, err = a.sm.Decode(l.Data, decoded); err != nil {
				decoded = decoded[:sp.start]
				sp.err = fmt.Errorf("decode entry %d: %w", l.Index, err)
			}
		}
		sp.n = len(decoded) - sp.start
		spans = append(spans, sp)
	}
	cmds := a.cmds[:0]
	for i, l := range logs {
		for _, c := range decoded[spans[i].start : spans[i].start+spans[i].n] {
			cmds = append(cmds, Command{Index: l.Index, Term: l.Term, Cmd: c})
		}
	}
	if len(cmds) > 0 {
		a.sm.Apply(cmds)
	}
	for i, sp := range spans {
		switch {
		case sp.err != nil:
			out[i] = entryError{sp.err}
		case sp.n == 1:
			out[i] = cmds[sp.start].Result
		case sp.n > 1:
			res := make(batchResults, sp.n)
			for j := range res {
				res[j] = cmds[sp.start+j].Result
			}
			out[i] = res
		}
	}
	// Drop the references so that applied commands can be collected.
	clear(decoded)
	clear(cmds)
	a.decoded, a.cmds, a.spans = decoded[:0], cmds[:0], spans[:0]
	if len(logs) > 0 {
		a.applied.advance(logs[len(logs)-1].Index)
	}
	return out
}

// Snapshot implements raft.FSM. The state machine encodes its state here,
// between applies; raft persists the bytes afterwards without blocking
// them.
func (a *fsmAdapter) Snapshot() (raft.FSMSnapshot, error) {
	data, err := a.sm.Snapshot()
	if err != nil {
		return nil, err
	}
	return snapshot(data), nil
}

// Restore implements raft.FSM, replacing the whole state.
func (a *fsmAdapter) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("read snapshot: %w", err)
	}
	return a.sm.Restore(data)
}

// snapshot is an encoded state, written to raft's snapshot sink.
type snapshot []byte

// Persist implements raft.FSMSnapshot.
func (s snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("write snapshot: %w", err)
	}
	return sink.Close()
}

// Release implements raft.FSMSnapshot.
func (snapshot) Release() {}
