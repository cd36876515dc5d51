package fsm

import (
	"slices"
	"strings"
)

// Pages of the read API: each returns at most limit items after a cursor,
// in a fixed order, and whether more follow, so that a reader can walk the
// whole state a bounded page at a time. The state may change between
// pages: an item added behind the cursor is missed, one removed is not
// returned.

// LocksAfter returns up to limit locks whose names start with prefix and
// sort after after ("" for the first page), by name, and whether more
// follow. limit must be positive.
func (m *Machine) LocksAfter(prefix, after string, limit int) ([]LockInfo, bool) {
	var names []string
	for name := range m.locks.byName {
		if strings.HasPrefix(name, prefix) && name > after {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	more := len(names) > limit
	if more {
		names = names[:limit]
	}
	out := make([]LockInfo, len(names))
	for i, name := range names {
		out[i] = m.locks.info(m.locks.byName[name])
	}
	return out, more
}

// SessionsAfter returns up to limit live sessions with ids above after,
// by id, and whether more follow. limit must be positive.
func (m *Machine) SessionsAfter(after uint64, limit int) ([]SessionInfo, bool) {
	var ids []uint64
	for id := range m.sessions {
		if id > after {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	more := len(ids) > limit
	if more {
		ids = ids[:limit]
	}
	out := make([]SessionInfo, len(ids))
	for i, id := range ids {
		out[i] = m.sessions[id].info()
	}
	return out, more
}
