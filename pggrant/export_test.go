package pggrant

// Offering reports whether a waiter of g for name has a handoff offer up,
// for tests that must release only then.
func Offering(g *Grantor, name string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.offers[name]) > 0
}

// OnSleep makes g call f whenever a waiter has tried and goes to sleep.
// Set it before any Acquire.
func OnSleep(g *Grantor, f func(name string)) { g.onSleep = f }
