package raftstore

import (
	"sync"

	"github.com/hashicorp/raft"
)

// logCache keeps the newest log entries in memory in front of the log on
// disk (Config.LogCacheEntries). hashicorp/raft reads every entry back
// from its LogStore after writing it: the leader once per follower, to
// send it, and every member to apply it once committed; raft-wal serves
// each such read with a pread of the segment file and a copy. From the
// cache it is a pointer to the entry raft stored.
//
// An entry enters the cache only after the store below wrote and fsynced
// it (StoreLogs returned nil), so the cache never answers with an entry
// the disk does not hold; a truncation (DeleteRange, after a conflicting
// tail or a compaction) empties it first. Errors of the store pass through
// unchanged. It is raft.LogCache with those two differences: that one
// wraps a store's error in a string, losing what it wraps.
type logCache struct {
	raft.LogStore
	mu   sync.RWMutex
	ring []*raft.Log // entry i at ring[i % len(ring)]
}

var _ raft.MonotonicLogStore = (*logCache)(nil)

// newLogCache returns store with a cache of the newest entries in front
// of it, or store itself when entries is 0.
func newLogCache(store raft.LogStore, entries int) raft.LogStore {
	if entries <= 0 {
		return store
	}
	return &logCache{LogStore: store, ring: make([]*raft.Log, entries)}
}

// GetLog implements raft.LogStore. The Log it fills shares its Data with
// the cached entry; raft and the fsmAdapter only read it.
func (c *logCache) GetLog(index uint64, log *raft.Log) error {
	c.mu.RLock()
	l := c.ring[index%uint64(len(c.ring))]
	c.mu.RUnlock()
	if l != nil && l.Index == index {
		*log = *l
		return nil
	}
	return c.LogStore.GetLog(index, log)
}

// StoreLog implements raft.LogStore.
func (c *logCache) StoreLog(log *raft.Log) error {
	return c.StoreLogs([]*raft.Log{log})
}

// StoreLogs implements raft.LogStore: the entries are cached once the store
// has them on disk.
func (c *logCache) StoreLogs(logs []*raft.Log) error {
	if err := c.LogStore.StoreLogs(logs); err != nil {
		return err
	}
	c.mu.Lock()
	for _, l := range logs {
		c.ring[l.Index%uint64(len(c.ring))] = l
	}
	c.mu.Unlock()
	return nil
}

// DeleteRange implements raft.LogStore: the cache is emptied before the
// store truncates, so no removed entry is served from it afterwards.
func (c *logCache) DeleteRange(min, max uint64) error {
	c.mu.Lock()
	clear(c.ring)
	c.mu.Unlock()
	return c.LogStore.DeleteRange(min, max)
}

// IsMonotonic implements raft.MonotonicLogStore as the store below does:
// raft-wal's indexes have no gaps, which raft must know when it restores a
// snapshot.
func (c *logCache) IsMonotonic() bool {
	m, ok := c.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}
