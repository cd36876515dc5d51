package raftstore

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// fsmAdapter is the raft.BatchingFSM a Node gives hashicorp/raft: it
// decodes each entry into its commands with the StateMachine's codec,
// applies all the commands raft hands over at once in one StateMachine.Apply
// call, and answers each entry with its result (one command) or its
// batchResults (several). It then publishes the index applied.
//
// An entry that does not decode, a state machine that cannot go on
// (Apply's error) and a snapshot that does not restore stop the adapter
// for good: it fails the entries from that one on, applies nothing more,
// and tells the node through onFail, which stops. A committed entry is
// never skipped: skipping one would leave this member's state (and the
// tokens it issues) different from the others'.
//
// Raft calls it from its FSM goroutine only, so the scratch slices need no
// lock.
type fsmAdapter struct {
	sm      StateMachine
	applied appliedIndex
	// where names the log segment file holding an index, for errors.
	where func(index uint64) string
	// log, when set, is told how long each snapshot's encoding took.
	log *slog.Logger

	// proposed holds the commands of the entries this node proposes, which
	// it applies without decoding them.
	proposed proposedEntries

	decoded []any     // scratch: the commands of the entries being applied
	cmds    []Command // scratch: the same with their index and term
	spans   []span    // scratch: which commands each entry holds

	mu     sync.Mutex
	failed error       // why the adapter stopped; nil while it runs
	onFail func(error) // told once when it stops; set by Open
}

var _ raft.BatchingFSM = (*fsmAdapter)(nil)

// span is the run of commands one entry decoded into.
type span struct{ start, n int }

// batchResults is an entry's response when it holds several commands: one
// result per command, in order.
type batchResults []any

// entryError is an entry's response when it was not applied.
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
	if err := a.err(); err != nil {
		a.refuse(out, err)
		return out
	}
	// good is the number of entries, from the first, that decoded.
	good := len(logs)
	decoded, spans := a.decoded[:0], a.spans[:0]
	for i, l := range logs {
		sp := span{start: len(decoded)}
		if l.Type == raft.LogCommand {
			if cmds, ok := a.proposed.take(l.Data); ok {
				decoded = append(decoded, cmds...)
				spans = append(spans, span{start: sp.start, n: len(cmds)})
				continue
			}
			var err error
			if decoded, err = a.sm.Decode(l.Data, decoded); err != nil {
				decoded = decoded[:sp.start]
				if newerFormat(err) {
					a.fail(fmt.Errorf("%w: raft log entry %d (term %d%s) is not of a format this build applies: upgrade this node: %w", ErrNewerFormat, l.Index, l.Term, a.file(l.Index), err))
				} else {
					a.fail(fmt.Errorf("%w: raft log entry %d (term %d%s) does not decode: %w", ErrDamaged, l.Index, l.Term, a.file(l.Index), err))
				}
				good = i
				break
			}
		}
		sp.n = len(decoded) - sp.start
		spans = append(spans, sp)
	}
	cmds := a.cmds[:0]
	for i, l := range logs[:good] {
		for _, c := range decoded[spans[i].start : spans[i].start+spans[i].n] {
			cmds = append(cmds, Command{Index: l.Index, Term: l.Term, Cmd: c})
		}
	}
	if len(cmds) > 0 {
		if err := a.sm.Apply(cmds); err != nil {
			a.fail(fmt.Errorf("apply raft log entries %d to %d: %w", logs[0].Index, logs[good-1].Index, err))
			// None of the results may reach a proposer.
			good = 0
		}
	}
	for i, sp := range spans[:good] {
		switch {
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
	if good < len(logs) {
		a.refuse(out[good:], a.err())
	}
	// Drop the references so that applied commands can be collected.
	clear(decoded)
	clear(cmds)
	a.decoded, a.cmds, a.spans = decoded[:0], cmds[:0], spans[:0]
	if good > 0 {
		a.applied.advance(logs[good-1].Index)
	}
	return out
}

// refuse answers entries that were not applied because the adapter
// stopped.
func (a *fsmAdapter) refuse(out []any, cause error) {
	err := fmt.Errorf("%w: the node stopped before applying the entry: %w", ErrOutcomeUnknown, cause)
	for i := range out {
		out[i] = entryError{err}
	}
}

// file returns ", in FILE" for the log segment holding index, or "".
func (a *fsmAdapter) file(index uint64) string {
	if a.where == nil {
		return ""
	}
	if f := a.where(index); f != "" {
		return ", in " + f
	}
	return ""
}

// fail stops the adapter with err, once; later calls keep the first error.
func (a *fsmAdapter) fail(err error) {
	a.mu.Lock()
	if a.failed != nil {
		a.mu.Unlock()
		return
	}
	a.failed = err
	notify := a.onFail
	a.mu.Unlock()
	if notify != nil {
		notify(err)
	}
}

// err returns why the adapter stopped, or nil.
func (a *fsmAdapter) err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.failed
}

// watch sets the function told when the adapter stops. If it stopped
// already (while raft restored a snapshot on start), watch returns why
// instead.
func (a *fsmAdapter) watch(onFail func(error)) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.failed != nil {
		return a.failed
	}
	a.onFail = onFail
	return nil
}

// Snapshot implements raft.FSM. The state machine encodes its state here,
// between applies; raft persists the bytes afterwards without blocking
// them. A stopped adapter takes no snapshot. The time the encoding took
// (applies wait for it) is logged, with the index and size.
func (a *fsmAdapter) Snapshot() (raft.FSMSnapshot, error) {
	if err := a.err(); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	start := time.Now()
	data, err := a.sm.Snapshot()
	if err != nil {
		return nil, err
	}
	if a.log != nil {
		a.log.Info("raft: state encoded for a snapshot", "index", a.applied.load(), "bytes", len(data), "encode_ms", time.Since(start).Milliseconds())
	}
	return snapshot(data), nil
}

// Restore implements raft.FSM, replacing the whole state. A snapshot that
// passed its checksum but does not restore stops the adapter: the state
// machine is left empty, and applying the log to an empty state would
// issue tokens again.
func (a *fsmAdapter) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	if err := a.err(); err != nil {
		return fmt.Errorf("restore snapshot: %w", err)
	}
	data, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("read snapshot: %w", err)
	}
	if err := a.sm.Restore(data); err != nil {
		if newerFormat(err) {
			err = fmt.Errorf("%w: restore snapshot: not of a format this build applies: upgrade this node: %w", ErrNewerFormat, err)
		} else {
			err = fmt.Errorf("%w: restore snapshot: %w", ErrDamaged, err)
		}
		a.fail(err)
		return err
	}
	return nil
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
