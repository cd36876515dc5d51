package fsm

import "google.golang.org/protobuf/proto"

// CheckInvariants exposes checkInvariants to the external tests.
func CheckInvariants(m *Machine) error { return m.checkInvariants() }

// UnknownIn exposes unknownIn, the walk Decode and Restore make for what
// this build does not know, to the benchmarks.
func UnknownIn(m proto.Message) string { return unknownIn(m.ProtoReflect()) }
