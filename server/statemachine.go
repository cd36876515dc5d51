package server

import (
	"sync"
	"time"

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
	// prepareResults, when set, gets the results of each entry this node
	// proposed before its proposers do (raftstore.ResultPreparer).
	prepareResults func(results []any)
	// reservation, when set, records each new end of the token reservation
	// on this node's disk before a token in it is handed out
	// (recordReservations).
	reservation *tokenReservation
	// reserveErr is the failure to record a reservation, guarded by mu;
	// once set, nothing more is applied.
	reserveErr error
}

var _ raftstore.ResultPreparer = (*stateMachine)(nil)

// PrepareResults implements raftstore.ResultPreparer.
func (s *stateMachine) PrepareResults(results []any) {
	if s.prepareResults != nil {
		s.prepareResults(results)
	}
}

func newStateMachine(obs fsm.Observer) *stateMachine {
	return &stateMachine{m: fsm.New(obs)}
}

// Size implements raftstore.Codec.
func (s *stateMachine) Size(cmd any) int { return fsm.EncodedSize(cmd.(*statev1.Command)) }

// Encode implements raftstore.Codec: one command as itself, several as a
// statev1.Batch (fsm.EncodeEntry).
func (s *stateMachine) Encode(cmds []any) ([]byte, error) {
	return fsm.EncodeEntry(len(cmds), func(i int) *statev1.Command { return cmds[i].(*statev1.Command) })
}

// RoundTrips implements raftstore.RoundTripCodec: fsm.EncodeEntry writes
// the commands this server builds and DecodeEntry gives them back as the
// machine applies them, when each is one DecodeEntry accepts (a format
// version, kind and fields this build knows: fsm.CheckDecodable; a test
// proposing a future version's command has its entry decoded, and
// refused, on the leader too); no command is changed once proposed
// (Server.propose stamps its time before). The leader applies the
// commands it proposed without decoding them.
func (s *stateMachine) RoundTrips(cmds []any) bool {
	for _, c := range cmds {
		if fsm.CheckDecodable(c.(*statev1.Command)) != nil {
			return false
		}
	}
	return true
}

var _ raftstore.RoundTripCodec = (*stateMachine)(nil)

// Decode implements raftstore.Codec: the commands of a batch, or the entry's
// one command. An entry is refused (and the node stops, see
// raftstore.Codec) unless every command in it is one this version knows,
// whole (fsm.DecodeEntry).
func (s *stateMachine) Decode(entry []byte, dst []any) ([]any, error) {
	cmds, err := fsm.DecodeEntry(entry)
	if err != nil {
		return dst, err
	}
	for _, c := range cmds {
		dst = append(dst, c)
	}
	return dst, nil
}

// recordReservations makes the machine record each new end of its token
// reservation in r before a token in it is handed out. A failure to record
// one stops the applies (Apply returns it, and the node stops).
func (s *stateMachine) recordReservations(r *tokenReservation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reservation = r
	s.m.SetReservationHook(func(end fence.Token) {
		if s.reserveErr == nil {
			s.reserveErr = r.raise(end)
		}
	})
}

// Apply implements raftstore.StateMachine. Each command's Result is an
// *fsm.Result. It returns an error, and applies nothing more, when a new
// token reservation could not be recorded on disk: the results must not
// reach clients, since their tokens may be above what this node recorded.
func (s *stateMachine) Apply(cmds []raftstore.Command) error {
	results := make([]fsm.Result, len(cmds))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reserveErr != nil {
		return s.reserveErr
	}
	for i := range cmds {
		c := &cmds[i]
		s.applied = c.Index
		if s.beforeApply != nil {
			s.beforeApply(c.Index)
		}
		results[i] = s.applyCommand(c.Cmd.(*statev1.Command))
		if s.reserveErr != nil {
			return s.reserveErr
		}
		c.Result = &results[i]
	}
	return nil
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
	if s.reservation != nil {
		if err := s.reservation.raise(s.m.ReservedToken()); err != nil {
			s.reserveErr = err
			return err
		}
	}
	if s.afterRestore != nil {
		s.afterRestore(s.m)
	}
	return nil
}
