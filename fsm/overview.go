package fsm

import "strings"

// The overview of the other primitives, for readers that show everything
// under a prefix at once (the dashboard): like LocksVisible, each returns
// up to limit items whose names start with prefix and that visible accepts
// (nil: all), by name, with the number hidden and whether more follow.

// visibleInfos returns, by name, the info of up to limit names of byName
// that start with prefix and that visible accepts, how many it skipped as
// hidden and whether more follow.
func visibleInfos[V, I any](byName map[string]V, prefix string, visible func(string) bool, limit int, info func(string) I) (out []I, hidden int, more bool) {
	all, _ := keysAfter(byName, "", func(name string) bool { return strings.HasPrefix(name, prefix) }, len(byName)+1)
	for _, name := range all {
		if visible != nil && !visible(name) {
			hidden++
			continue
		}
		if len(out) == limit {
			return out, hidden, true
		}
		out = append(out, info(name))
	}
	return out, hidden, false
}

// SemaphoresVisible returns the semaphores under prefix (see above).
func (m *Machine) SemaphoresVisible(prefix string, visible func(string) bool, limit int) ([]SemaphoreInfo, int, bool) {
	return visibleInfos(m.semaphores.byName, prefix, visible, limit, m.Semaphore)
}

// RWLocksVisible returns the read/write locks under prefix (see above).
func (m *Machine) RWLocksVisible(prefix string, visible func(string) bool, limit int) ([]RWLockInfo, int, bool) {
	return visibleInfos(m.rwlocks.byName, prefix, visible, limit, m.RWLock)
}

// ElectionsVisible returns the elections under prefix (see above), idle
// ones (no leader, no candidate, still remembered) included.
func (m *Machine) ElectionsVisible(prefix string, visible func(string) bool, limit int) ([]ElectionInfo, int, bool) {
	return visibleInfos(m.elections.byName, prefix, visible, limit, m.Election)
}
