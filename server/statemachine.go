package server

import (
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
	"github.com/fenced-dev/fenced/raftstore"
)

// stateMachine adapts fsm.Machine to raftstore.StateMachine and lets
// handlers read the state under a read lock. Its commands are
// *statev1.Command; commands proposed together share one entry as a
// statev1.Batch, applied command by command, each exactly as if it were an
// entry of its own.
type stateMachine struct {
	mu      sync.RWMutex
	m       *fsm.Machine
	applied uint64 // index of the last applied entry, guarded by mu
	// observeApply, when set, receives each command's apply time in seconds.
	observeApply func(seconds float64)
	// beforeApply, when set, is told the index of each command's entry
	// before the command is applied (under the lock, on the applying
	// goroutine).
	beforeApply func(index uint64)
	// afterRestore, when set, is called with the restored machine (under
	// the lock) after a snapshot replaced the whole state, so what the
	// server keeps beside the state (session deadlines) can follow it.
	afterRestore func(m *fsm.Machine)
}

var _ raftstore.StateMachine = (*stateMachine)(nil)

func newStateMachine(obs fsm.Observer) *stateMachine {
	return &stateMachine{m: fsm.New(obs)}
}

// Size implements raftstore.Codec.
func (s *stateMachine) Size(cmd any) int { return proto.Size(cmd.(*statev1.Command)) }

// Encode implements raftstore.Codec: one command as itself, several as a
// statev1.Batch.
func (s *stateMachine) Encode(cmds []any) ([]byte, error) {
	if len(cmds) == 1 {
		return fsm.Encode(cmds[0].(*statev1.Command))
	}
	batch := make([]*statev1.Command, len(cmds))
	for i, c := range cmds {
		batch[i] = c.(*statev1.Command)
	}
	return fsm.Encode(&statev1.Command{Op: &statev1.Command_Batch{Batch: &statev1.Batch{Commands: batch}}})
}

// Decode implements raftstore.Codec: the commands of a batch, or the entry's
// one command.
func (s *stateMachine) Decode(entry []byte, dst []any) ([]any, error) {
	cmd, err := fsm.Decode(entry)
	if err != nil {
		return dst, err
	}
	b, ok := cmd.GetOp().(*statev1.Command_Batch)
	if !ok {
		return append(dst, cmd), nil
	}
	for _, c := range b.Batch.GetCommands() {
		dst = append(dst, c)
	}
	return dst, nil
}

// Apply implements raftstore.StateMachine. Each command's Result is an
// *fsm.Result.
func (s *stateMachine) Apply(cmds []raftstore.Command) {
	results := make([]fsm.Result, len(cmds))
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range cmds {
		c := &cmds[i]
		s.applied = c.Index
		if s.beforeApply != nil {
			s.beforeApply(c.Index)
		}
		cmd := c.Cmd.(*statev1.Command)
		if _, nested := cmd.GetOp().(*statev1.Command_Batch); nested {
			results[i] = fsm.Result{Err: fmt.Errorf("%w: a batch inside a batch", fence.ErrInvalidArgument)}
		} else {
			results[i] = s.applyCommand(cmd)
		}
		c.Result = &results[i]
	}
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

// Snapshot implements raftstore.StateMachine. The state is encoded under
// the read lock.
func (s *stateMachine) Snapshot() ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.m.Snapshot()
}

// Restore implements raftstore.StateMachine, replacing the whole state.
func (s *stateMachine) Restore(snapshot []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.m.Restore(snapshot); err != nil {
		return err
	}
	if s.afterRestore != nil {
		s.afterRestore(s.m)
	}
	return nil
}
