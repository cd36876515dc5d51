package server

import (
	"fmt"
	"io"
	"sync"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
	"github.com/hashicorp/raft"
)

// stateMachine adapts fsm.Machine to raft.FSM and lets handlers read the
// state under a read lock.
type stateMachine struct {
	mu      sync.RWMutex
	m       *fsm.Machine
	applied uint64 // index of the last applied entry, guarded by mu
	// observeApply, when set, receives each command's apply time in seconds.
	observeApply func(seconds float64)
	// beforeApply, when set, is told the index of each entry before it is
	// applied (under the lock, on the applying goroutine).
	beforeApply func(index uint64)
}

var _ raft.BatchingFSM = (*stateMachine)(nil)

func newStateMachine(obs fsm.Observer) *stateMachine {
	return &stateMachine{m: fsm.New(obs)}
}

// Apply implements raft.FSM. It returns an fsm.Result.
func (s *stateMachine) Apply(l *raft.Log) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applyLocked(l)
}

// ApplyBatch implements raft.BatchingFSM: the entries Raft hands over
// together are applied in order under one lock, each exactly as Apply
// would apply it.
func (s *stateMachine) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, l := range logs {
		out[i] = s.applyLocked(l)
	}
	return out
}

// applyLocked applies one entry; s.mu is held.
func (s *stateMachine) applyLocked(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	cmd, err := fsm.Decode(l.Data)
	s.applied = l.Index
	if s.beforeApply != nil {
		s.beforeApply(l.Index)
	}
	if err != nil {
		return fsm.Result{Err: err}
	}
	if b, ok := cmd.GetOp().(*statev1.Command_Batch); ok {
		// One entry, several commands: each applied in order as if it
		// were an entry of its own.
		cmds := b.Batch.GetCommands()
		out := make(batchResults, len(cmds))
		for i, c := range cmds {
			if _, nested := c.GetOp().(*statev1.Command_Batch); nested {
				out[i] = fsm.Result{Err: fmt.Errorf("%w: a batch inside a batch", fence.ErrInvalidArgument)}
				continue
			}
			out[i] = s.applyCommand(c)
		}
		return out
	}
	return s.applyCommand(cmd)
}

// applyCommand applies one command to the machine; s.mu is held.
func (s *stateMachine) applyCommand(cmd *statev1.Command) fsm.Result {
	if s.observeApply == nil {
		return s.m.Apply(cmd)
	}
	start := time.Now()
	res := s.m.Apply(cmd)
	s.observeApply(time.Since(start).Seconds())
	return res
}

// read runs f with the state locked for reading.
func (s *stateMachine) read(f func(m *fsm.Machine)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	f(s.m)
}

// appliedIndex returns the index of the last applied entry.
func (s *stateMachine) appliedIndex() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.applied
}

// Snapshot implements raft.FSM. The state is encoded under the read lock;
// raft persists the bytes afterwards without blocking applies.
func (s *stateMachine) Snapshot() (raft.FSMSnapshot, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	data, err := s.m.Snapshot()
	if err != nil {
		return nil, err
	}
	return snapshot(data), nil
}

// Restore implements raft.FSM, replacing the whole state.
func (s *stateMachine) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("read snapshot: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m.Restore(data)
}

// snapshot is an encoded state, written to raft's snapshot sink.
type snapshot []byte

// Persist implements raft.FSMSnapshot.
func (s snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		sink.Cancel()
		return fmt.Errorf("write snapshot: %w", err)
	}
	return sink.Close()
}

// Release implements raft.FSMSnapshot.
func (snapshot) Release() {}
