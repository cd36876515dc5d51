package raftstore

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
)

// openCachedLog opens a real raft-wal log in a temporary directory behind a
// cache of entries entries.
func openCachedLog(t *testing.T, entries int) (*logStore, *logCache) {
	t.Helper()
	s, err := openLogStore(t.TempDir(), 0, hclog.NewNullLogger(), nil, nil)
	if err != nil {
		t.Fatalf("open log: %v", err)
	}
	t.Cleanup(func() { s.close() })
	return s, newLogCache(s, entries).(*logCache)
}

func entries(term uint64, from, to uint64, tag string) []*raft.Log {
	var logs []*raft.Log
	for i := from; i <= to; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: fmt.Appendf(nil, "%s%d", tag, i)})
	}
	return logs
}

// wantLog fails unless index reads back with term and data from c.
func wantLog(t *testing.T, c raft.LogStore, index, term uint64, data string) {
	t.Helper()
	var l raft.Log
	if err := c.GetLog(index, &l); err != nil {
		t.Fatalf("GetLog(%d): %v", index, err)
	}
	if l.Index != index || l.Term != term || !bytes.Equal(l.Data, []byte(data)) {
		t.Fatalf("GetLog(%d) = index %d term %d %q, want term %d %q", index, l.Index, l.Term, l.Data, term, data)
	}
}

// A follower that drops a deposed leader's tail and stores the new
// leader's entries at the same indexes must never read the old ones back
// from the cache: applying one would apply a command that was never
// committed.
func TestLogCache_TailTruncationServesTheReplacement(t *testing.T) {
	_, c := openCachedLog(t, 16)
	if err := c.StoreLogs(entries(1, 1, 10, "old")); err != nil {
		t.Fatal(err)
	}
	wantLog(t, c, 9, 1, "old9")
	if err := c.DeleteRange(8, 10); err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := c.GetLog(9, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog(9) after the tail was dropped = %v (term %d %q), want raft.ErrLogNotFound", err, l.Term, l.Data)
	}
	if err := c.StoreLogs(entries(2, 8, 9, "new")); err != nil {
		t.Fatal(err)
	}
	wantLog(t, c, 8, 2, "new8")
	wantLog(t, c, 9, 2, "new9")
	wantLog(t, c, 7, 1, "old7")
}

// An entry the log on disk refused is not cached: the cache answers only
// with what a restart would find.
func TestLogCache_RefusedEntryIsNotCached(t *testing.T) {
	_, c := openCachedLog(t, 16)
	if err := c.StoreLogs(entries(1, 1, 3, "a")); err != nil {
		t.Fatal(err)
	}
	// raft-wal refuses a gap in the indexes.
	if err := c.StoreLogs(entries(1, 5, 5, "gap")); err == nil {
		t.Fatal("the log accepted entry 5 after 3")
	}
	var l raft.Log
	if err := c.GetLog(5, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog(5) after the log refused it = %v (%q), want raft.ErrLogNotFound", err, l.Data)
	}
}

// Entries older than the ring are read from the disk, not from the slot a
// newer entry took.
func TestLogCache_WrapsAroundToTheDisk(t *testing.T) {
	s, c := openCachedLog(t, 4)
	if err := c.StoreLogs(entries(1, 1, 11, "e")); err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 11; i++ {
		wantLog(t, c, i, 1, fmt.Sprintf("e%d", i))
	}
	// The newest four are served from memory: the same Data as stored.
	var l raft.Log
	if err := c.GetLog(11, &l); err != nil {
		t.Fatal(err)
	}
	if got, want := &l.Data[0], &c.ring[11%4].Data[0]; got != want {
		t.Fatal("entry 11 was not served from the cache")
	}
	// And the log on disk holds them all, as without a cache.
	for i := uint64(1); i <= 11; i++ {
		wantLog(t, s, i, 1, fmt.Sprintf("e%d", i))
	}
}

// The store's errors reach raft unchanged (raft.LogCache would flatten
// them into a string), and the store's monotonic indexes stay visible to
// raft, which relies on them when it restores a snapshot.
func TestLogCache_PassesTheStoreThrough(t *testing.T) {
	s, c := openCachedLog(t, 4)
	if !c.IsMonotonic() {
		t.Fatal("the cached raft-wal log does not say it is monotonic")
	}
	if err := s.WAL.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.StoreLogs(entries(1, 1, 1, "x")); !errors.Is(err, wal.ErrClosed) {
		t.Fatalf("StoreLogs on a closed log = %v, want an error wrapping raft-wal's ErrClosed", err)
	}
	if got := newLogCache(s, 0); got != raft.LogStore(s) {
		t.Fatalf("a cache of 0 entries is %T, want the store itself", got)
	}
}
