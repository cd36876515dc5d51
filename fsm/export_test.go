package fsm

// CheckInvariants exposes checkInvariants to the external tests.
func CheckInvariants(m *Machine) error { return m.checkInvariants() }
