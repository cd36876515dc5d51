//go:build !fencedfaults

package fsm

// faults are the node-local faults of a test build; a production build has
// none (see faults_on.go).
type faults struct{}

func (faults) acceptStale() bool        { return false }
func (faults) skipScope() bool          { return false }
func (faults) anyOwner() bool           { return false }
func (faults) overCapacity() bool       { return false }
func (faults) readerBesideWriter() bool { return false }
func (faults) twoLeaders() bool         { return false }
