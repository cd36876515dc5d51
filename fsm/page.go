package fsm

import (
	"cmp"
	"slices"
	"strings"
)

// Pages of the read API: each returns at most limit items after a cursor,
// in a fixed order, and whether more follow, so that a reader can walk the
// whole state a bounded page at a time. The state may change between
// pages: an item added behind the cursor is missed, one removed is not
// returned.

// keysAfter returns, sorted, up to limit keys of byKey above after that
// keep accepts, and whether more follow.
func keysAfter[K cmp.Ordered, V any](byKey map[K]V, after K, keep func(K) bool, limit int) ([]K, bool) {
	var keys []K
	for k := range byKey {
		if k > after && keep(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if len(keys) > limit {
		return keys[:limit], true
	}
	return keys, false
}

// A reader may be allowed to see only some names (read permissions on
// name prefixes): visible says which, nil meaning every name. The pages
// then skip what it may not see and count it in hidden, up to the last
// item returned (to the end, on the last page), so that the pages of a
// walk add up to everything hidden, and a cursor never names a hidden
// item.

// LocksAfter returns up to limit locks whose names start with prefix and
// sort after after ("" for the first page), by name, and whether more
// follow. limit must be positive.
func (m *Machine) LocksAfter(prefix, after string, limit int) ([]LockInfo, bool) {
	out, _, more := m.LocksVisible(prefix, after, nil, limit)
	return out, more
}

// LocksVisible is LocksAfter of the locks visible accepts (nil: all),
// with the number of the others it skipped (hidden).
func (m *Machine) LocksVisible(prefix, after string, visible func(string) bool, limit int) (locks []LockInfo, hidden int, more bool) {
	names, _ := keysAfter(m.locks.byName, after, func(name string) bool { return strings.HasPrefix(name, prefix) }, len(m.locks.byName))
	skipped := 0 // hidden since the last lock returned
	for _, name := range names {
		if visible != nil && !visible(name) {
			skipped++
			continue
		}
		if len(locks) == limit {
			return locks, hidden, true
		}
		locks = append(locks, m.locks.info(m.locks.byName[name]))
		hidden, skipped = hidden+skipped, 0
	}
	return locks, hidden + skipped, false
}

// SessionsAfter returns up to limit live sessions with ids above after,
// by id, and whether more follow. limit must be positive.
func (m *Machine) SessionsAfter(after uint64, limit int) ([]SessionInfo, bool) {
	out, _, more := m.SessionsVisible(after, nil, limit)
	return out, more
}

// SessionsVisible is SessionsAfter for a reader who may see only the
// names visible accepts (nil: all): a session is shown with the objects it
// holds and waits for that are visible, and hidden (counted) when none is;
// a session that holds and waits for nothing is shown only when visible
// is nil.
func (m *Machine) SessionsVisible(after uint64, visible func(string) bool, limit int) (sessions []SessionInfo, hidden int, more bool) {
	ids, _ := keysAfter(m.sessions, after, func(uint64) bool { return true }, len(m.sessions))
	skipped := 0 // hidden since the last session returned
	for _, id := range ids {
		si := m.sessions[id].info()
		if visible != nil {
			si.Held, si.Waiting, si.Others = keepNames(si.Held, visible), keepNames(si.Waiting, visible), keepBindings(si.Others, visible)
			if len(si.Held) == 0 && len(si.Waiting) == 0 && len(si.Others) == 0 {
				skipped++
				continue
			}
		}
		if len(sessions) == limit {
			return sessions, hidden, true
		}
		sessions = append(sessions, si)
		hidden, skipped = hidden+skipped, 0
	}
	return sessions, hidden + skipped, false
}

// keepBindings returns the bindings whose names visible accepts, in their
// order.
func keepBindings(bs []Binding, visible func(string) bool) []Binding {
	var out []Binding
	for _, b := range bs {
		if visible(b.Name) {
			out = append(out, b)
		}
	}
	return out
}

// keepNames returns the names visible accepts, in their order.
func keepNames(names []string, visible func(string) bool) []string {
	var out []string
	for _, n := range names {
		if visible(n) {
			out = append(out, n)
		}
	}
	return out
}
