package pggrant

// Offering reports whether a waiter of g for name has a handoff offer up
// (it has tried once and sleeps), for tests that must release only then.
func Offering(g *Grantor, name string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.offers[name] != nil
}
