//go:build linux

package raftstore

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/types"
)

// The zeroer writes zeros ahead while the log appends, syncs and rewrites
// (a failed append is written again at the same offset): afterwards every
// byte the log wrote is there, and every other byte reads zero.
func TestZeroedSegment_NeverWritesOverTheLog(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		dir := t.TempDir()
		const size = 3*zeroAhead + 12345
		wf, err := newSegmentFS().Create(dir, "seg.wal", size)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(seed, seed))
		want := make([]byte, size)
		var off int64
		for off < size-8192 {
			n := 1 + rng.IntN(6000)
			p := make([]byte, n)
			for i := range p {
				p[i] = byte(1 + rng.IntN(255))
			}
			if rng.IntN(10) == 0 && off > int64(n) {
				off -= int64(n) // written again, as after a failed append
			}
			if _, err := wf.WriteAt(p, off); err != nil {
				t.Fatal(err)
			}
			copy(want[off:], p)
			off += int64(n)
			if rng.IntN(3) == 0 {
				if err := wf.Sync(); err != nil {
					t.Fatal(err)
				}
			}
			if rng.IntN(50) == 0 {
				time.Sleep(time.Millisecond) // let the zeroer get ahead
			}
		}
		if err := wf.Close(); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, "seg.wal"))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != size {
			t.Fatalf("seed %d: file is %d bytes, want %d", seed, len(got), size)
		}
		if i := firstDifference(got, want); i >= 0 {
			t.Fatalf("seed %d: byte %d is %#x, want %#x (the log wrote up to %d)", seed, i, got[i], want[i], off)
		}
	}
}

// Zeros really are written ahead of the log: after an append and a sync,
// the zeroer reaches zeroAhead past it, and a new file's directory entry
// is synced.
func TestZeroedSegment_ZeroesAheadOfTheLog(t *testing.T) {
	dir := t.TempDir()
	wf, err := newSegmentFS().Create(dir, "seg.wal", 4*zeroAhead)
	if err != nil {
		t.Fatal(err)
	}
	defer wf.Close()
	s := wf.(*zeroedSegment)
	if _, err := wf.WriteAt(bytes.Repeat([]byte{7}, 5000), 0); err != nil {
		t.Fatal(err)
	}
	if err := wf.Sync(); err != nil {
		t.Fatal(err)
	}
	if s.dir != "" {
		t.Errorf("the directory is still to be synced after the first sync")
	}
	for i := 0; ; i++ {
		s.mu.Lock()
		zeroed := s.zeroed
		s.mu.Unlock()
		if zeroed >= 5000+zeroAhead {
			break
		}
		if i == 500 {
			t.Fatalf("zeros written up to %d after 5 s, want %d", zeroed, 5000+zeroAhead)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A reopened tail segment holds the log's earlier writes past the point
// where this process writes first: nothing is zeroed in it.
func TestZeroedSegment_ReopenedTailIsLeftAlone(t *testing.T) {
	dir := t.TempDir()
	old := bytes.Repeat([]byte{9}, 2*zeroAhead)
	if err := os.WriteFile(filepath.Join(dir, "seg.wal"), old, 0o644); err != nil {
		t.Fatal(err)
	}
	wf, err := newSegmentFS().OpenWriter(dir, "seg.wal")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wf.WriteAt([]byte{1, 2, 3}, 100); err != nil {
		t.Fatal(err)
	}
	if err := wf.Sync(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if err := wf.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "seg.wal"))
	if err != nil {
		t.Fatal(err)
	}
	copy(old[100:], []byte{1, 2, 3})
	if i := firstDifference(got, old); i >= 0 {
		t.Fatalf("byte %d of the reopened tail is %#x, want %#x", i, got[i], old[i])
	}
}

// Create refuses an existing file and a size raft-wal's files refuse too;
// Create and OpenWriter wrap raft-wal's files (a raft-wal whose files are
// of another type would be left unwrapped, without zeros or fdatasync).
func TestSegmentFS_CreateAsRaftWAL(t *testing.T) {
	dir := t.TempDir()
	wf, err := newSegmentFS().Create(dir, "seg.wal", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := wf.(*zeroedSegment); !ok {
		t.Errorf("Create returned %T, not a *zeroedSegment: raft-wal's file type changed", wf)
	}
	_ = wf.Close()
	ow, err := newSegmentFS().OpenWriter(dir, "seg.wal")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ow.(*zeroedSegment); !ok {
		t.Errorf("OpenWriter returned %T, not a *zeroedSegment: raft-wal's file type changed", ow)
	}
	_ = ow.Close()
	if st, err := os.Stat(filepath.Join(dir, "seg.wal")); err != nil || st.Size() != 1<<20 {
		t.Fatalf("created file: %v, %v; want 1 MiB", st, err)
	}
	if _, err := newSegmentFS().Create(dir, "seg.wal", 1<<20); !os.IsExist(err) {
		t.Errorf("Create over an existing file: %v, want an exists error", err)
	}
	if _, err := newSegmentFS().Create(dir, "big.wal", 1<<31); err == nil {
		t.Errorf("Create of 2 GiB succeeded; raft-wal's files refuse it")
	}
}

func firstDifference(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// BenchmarkSegmentSync appends an entry-sized write and syncs it, in
// raft-wal's own files and in segmentFS's:
//
//	go test -run X -bench BenchmarkSegmentSync ./raftstore
func BenchmarkSegmentSync(b *testing.B) {
	for _, c := range []struct {
		name string
		vfs  types.VFS
	}{{"raft-wal", fs.New()}, {"zeroed", newSegmentFS()}} {
		b.Run(c.name, func(b *testing.B) {
			wf, err := c.vfs.Create(b.TempDir(), "seg.wal", 64<<20)
			if err != nil {
				b.Fatal(err)
			}
			defer wf.Close()
			p := bytes.Repeat([]byte{5}, 3600)
			var off int64
			b.ResetTimer()
			for b.Loop() {
				if off+int64(len(p)) > 64<<20 {
					b.Fatal("segment full")
				}
				if _, err := wf.WriteAt(p, off); err != nil {
					b.Fatal(err)
				}
				off += int64(len(p))
				if err := wf.Sync(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Close waits for a zeroer at work and stops it: nothing writes to the
// file once it is closed.
func TestZeroedSegment_CloseStopsTheZeroer(t *testing.T) {
	wf, err := newSegmentFS().Create(t.TempDir(), "seg.wal", 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	s := wf.(*zeroedSegment)
	if _, err := wf.WriteAt([]byte{1}, 0); err != nil {
		t.Fatal(err)
	}
	if err := wf.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := wf.Close(); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	running := s.running
	s.mu.Unlock()
	if running {
		t.Fatal("a zeroer is still running after Close")
	}
	if err := wf.Sync(); err == nil {
		t.Error("Sync of a closed file succeeded")
	}
}

// A failed sync of the zeros may have cost pages the log wrote meanwhile
// (Linux reports a failed writeback once and marks the pages clean): the
// log's next sync fails, and every one after it, even when the disk
// answers again.
func TestZeroedSegment_AFailedSyncOfTheZerosFailsTheLog(t *testing.T) {
	wf, err := newSegmentFS().Create(t.TempDir(), "seg.wal", 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer wf.Close()
	s := wf.(*zeroedSegment)
	eio := errors.New("EIO, the test's")
	calls := 0
	s.syncData = func(f *os.File) error {
		calls++         // under syncMu
		if calls == 2 { // the zeroer's, started by the log's first sync
			return eio
		}
		return fdatasync(f)
	}
	if _, err := wf.WriteAt([]byte{1}, 0); err != nil {
		t.Fatal(err)
	}
	if err := wf.Sync(); err != nil {
		t.Fatalf("the log's first sync: %v", err)
	}
	for i := 0; ; i++ {
		s.mu.Lock()
		running := s.running
		s.mu.Unlock()
		if !running {
			break
		}
		if i == 500 {
			t.Fatal("the zeroer still runs after 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i := range 2 {
		if err := wf.Sync(); !errors.Is(err, eio) {
			t.Fatalf("the log's sync %d after the zeroer's failed: %v, want %v", i+2, err, eio)
		}
	}
	if calls != 4 {
		t.Errorf("%d syncs, want 4 (the log's three and the zeroer's)", calls)
	}
}
