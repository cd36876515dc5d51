package fsm

import "strings"

// The overview of the other primitives, for readers that show everything
// under a prefix at once (the dashboard): like LocksVisible, each returns
// up to limit items whose names start with prefix and that visible accepts
// (nil: all), by name, with the number hidden and whether more follow.

// namesVisible returns, sorted, up to limit names of byName that start
// with prefix and that visible accepts, how many it skipped as hidden and
// whether more follow.
func namesVisible[V any](byName map[string]V, prefix string, visible func(string) bool, limit int) (names []string, hidden int, more bool) {
	all, _ := keysAfter(byName, "", func(name string) bool { return strings.HasPrefix(name, prefix) }, len(byName)+1)
	for _, name := range all {
		if visible != nil && !visible(name) {
			hidden++
			continue
		}
		if len(names) == limit {
			return names, hidden, true
		}
		names = append(names, name)
	}
	return names, hidden, false
}

// SemaphoresVisible returns the semaphores under prefix (see above).
func (m *Machine) SemaphoresVisible(prefix string, visible func(string) bool, limit int) (out []SemaphoreInfo, hidden int, more bool) {
	names, hidden, more := namesVisible(m.semaphores.byName, prefix, visible, limit)
	for _, n := range names {
		out = append(out, m.Semaphore(n))
	}
	return out, hidden, more
}

// RWLocksVisible returns the read/write locks under prefix (see above).
func (m *Machine) RWLocksVisible(prefix string, visible func(string) bool, limit int) (out []RWLockInfo, hidden int, more bool) {
	names, hidden, more := namesVisible(m.rwlocks.byName, prefix, visible, limit)
	for _, n := range names {
		out = append(out, m.RWLock(n))
	}
	return out, hidden, more
}

// ElectionsVisible returns the elections under prefix (see above), idle
// ones (no leader, no candidate, still remembered) included.
func (m *Machine) ElectionsVisible(prefix string, visible func(string) bool, limit int) (out []ElectionInfo, hidden int, more bool) {
	names, hidden, more := namesVisible(m.elections.byName, prefix, visible, limit)
	for _, n := range names {
		out = append(out, m.Election(n))
	}
	return out, hidden, more
}
