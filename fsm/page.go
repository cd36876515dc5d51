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

// LocksAfter returns up to limit locks whose names start with prefix and
// sort after after ("" for the first page), by name, and whether more
// follow. limit must be positive.
func (m *Machine) LocksAfter(prefix, after string, limit int) ([]LockInfo, bool) {
	names, more := keysAfter(m.locks.byName, after, func(name string) bool { return strings.HasPrefix(name, prefix) }, limit)
	out := make([]LockInfo, len(names))
	for i, name := range names {
		out[i] = m.locks.info(m.locks.byName[name])
	}
	return out, more
}

// SessionsAfter returns up to limit live sessions with ids above after,
// by id, and whether more follow. limit must be positive.
func (m *Machine) SessionsAfter(after uint64, limit int) ([]SessionInfo, bool) {
	ids, more := keysAfter(m.sessions, after, func(uint64) bool { return true }, limit)
	out := make([]SessionInfo, len(ids))
	for i, id := range ids {
		out[i] = m.sessions[id].info()
	}
	return out, more
}
