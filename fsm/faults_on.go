//go:build fencedfaults

package fsm

// faults are node-local faults of a test build (build tag fencedfaults),
// for the negative controls of the fault harness. They are set on one
// Machine, never written to the log or a snapshot, and do not exist in a
// production build.
type faults struct {
	unfencedKV bool
	everyOwner bool
}

// SetUnfencedKV makes this Machine's kv accept every write, stale or not:
// the negative control of the fault harness's stale-write checker. It
// exists only in test builds (build tag fencedfaults); every replica of a
// test cluster must be given the same setting, or they diverge.
func (m *Machine) SetUnfencedKV(on bool) { m.faults.unfencedKV = on }

func (f faults) acceptStale() bool { return f.unfencedKV }

// SetAnyOwner makes this Machine let every request act for every session,
// whatever secret it presents: the negative control of the fault
// harness's ownership checker. It exists only in test builds (build tag
// fencedfaults); every replica of a test cluster must be given the same
// setting, or they diverge.
func (m *Machine) SetAnyOwner(on bool) { m.faults.everyOwner = on }

func (f faults) anyOwner() bool { return f.everyOwner }
