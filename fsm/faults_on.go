//go:build fencedfaults

package fsm

// faults are node-local faults of a test build (build tag fencedfaults),
// for the negative controls of the fault harness. They are set on one
// Machine, never written to the log or a snapshot, and do not exist in a
// production build.
type faults struct {
	unfencedKV       bool
	unscopedKV       bool
	everyOwner       bool
	extraPermit      bool
	readerWithWriter bool
	secondLeader     bool
}

// SetUnfencedKV makes this Machine's kv accept every write, stale or not:
// the negative control of the fault harness's stale-write checker. It
// exists only in test builds (build tag fencedfaults); every replica of a
// test cluster must be given the same setting, or they diverge.
func (m *Machine) SetUnfencedKV(on bool) { m.faults.unfencedKV = on }

func (f faults) acceptStale() bool { return f.unfencedKV }

// SetUnscopedKV makes this Machine's kv skip the scope rule (a write's
// token need not be a live grant's whose scope covers the key) but keep
// the stale-token check: the negative control of the fault harness's
// scope checker. It exists only in test builds (build tag fencedfaults);
// every replica of a test cluster must be given the same setting, or they
// diverge.
func (m *Machine) SetUnscopedKV(on bool) { m.faults.unscopedKV = on }

func (f faults) skipScope() bool { return f.unfencedKV || f.unscopedKV }

// SetAnyOwner makes this Machine let every request act for every session,
// whatever secret it presents: the negative control of the fault
// harness's ownership checker. It exists only in test builds (build tag
// fencedfaults); every replica of a test cluster must be given the same
// setting, or they diverge.
func (m *Machine) SetAnyOwner(on bool) { m.faults.everyOwner = on }

func (f faults) anyOwner() bool { return f.everyOwner }

// SetOverCapacity makes this Machine's semaphores grant one permit more
// than their capacity: the negative control of the fault harness's
// semaphore checker. It exists only in test builds (build tag
// fencedfaults); every replica of a test cluster must be given the same
// setting, or they diverge.
func (m *Machine) SetOverCapacity(on bool) { m.faults.extraPermit = on }

func (f faults) overCapacity() bool { return f.extraPermit }

// SetReaderWithWriter makes this Machine's read/write locks admit a reader
// while a writer holds the lock: the negative control of the fault
// harness's read/write exclusion checker. It exists only in test builds
// (build tag fencedfaults); every replica of a test cluster must be given
// the same setting, or they diverge.
func (m *Machine) SetReaderWithWriter(on bool) { m.faults.readerWithWriter = on }

func (f faults) readerBesideWriter() bool { return f.readerWithWriter }

// SetSecondLeader makes this Machine's elections make a new candidate
// leader at once while another leads, without ending the first
// leadership: the negative control of the fault harness's election
// checker. It exists only in test builds (build tag fencedfaults); every
// replica of a test cluster must be given the same setting, or they
// diverge.
func (m *Machine) SetSecondLeader(on bool) { m.faults.secondLeader = on }

func (f faults) twoLeaders() bool { return f.secondLeader }
