package raftstore

import (
	"os"
	"sync"
	"syscall"

	"github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/types"

	"github.com/fenced-dev/fenced/internal/durable"
)

// How far ahead of the log's writes a segment file's blocks are written
// with zeros, and in what pieces (the log waits for at most one piece to
// publish a write's end).
const (
	zeroAhead = 4 << 20
	zeroChunk = 64 << 10
	pageSize  = 4096
)

// zeroPiece is what the zeroers write (read only).
var zeroPiece [zeroChunk]byte

// segmentFS is raft-wal's files (fs.FS) with two changes that make an
// append's sync cheaper, and no change to what any file holds:
//
//   - The blocks ahead of the log's writes in a segment file are written
//     with zeros and synced in the background (zeroAhead), a piece at a
//     time. A segment is preallocated (fallocate: its blocks are reserved
//     but unwritten) or, where the filesystem cannot, sparse; either way
//     the first write to a block changes the file's block map, and the
//     sync of that write then commits the filesystem's journal. Once a
//     block holds zeros that are on disk, an append into it changes no
//     metadata, and its sync writes the data alone. An unwritten block
//     and a block of zeros read the same, so a crash at any moment leaves
//     a file that reads as it would have without this.
//   - A segment file is synced with fdatasync, not fsync: both write the
//     data and the metadata needed to read it back (the block map, the
//     file's size); fsync also writes the modification time, which
//     nothing reads. The first sync of a new file also syncs its
//     directory, as raft-wal's does.
//
// Zeros are written only past the end of every write the log has made to
// the file, in page-aligned pieces, and a write publishes its end before
// it starts, under the same lock as each piece's check and write: so a
// piece never lands on bytes the log wrote. The cost is the log's
// bytes written twice (zeros, then data), off the append path.
type segmentFS struct{ *fs.FS }

// newSegmentFS returns raft-wal's files with the changes above (on Linux;
// elsewhere raft-wal's own, walfiles_other.go).
func newSegmentFS() types.VFS { return segmentFS{fs.New()} }

// Create implements types.VFS: raft-wal's new file (preallocated to
// size), written and synced as above.
func (v segmentFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	wf, err := v.FS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	ff, ok := wf.(*fs.File)
	if !ok {
		return wf, nil // not raft-wal v0.4's file: left as it is (TestSegmentFS_CreateAsRaftWAL fails)
	}
	return newZeroedSegment(&ff.File, dir, int64(size)), nil
}

// OpenWriter implements types.VFS: the tail segment, reopened, synced with
// fdatasync. It holds what the log wrote before, up to where this process
// does not know yet: no zeros are written into it.
func (v segmentFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	wf, err := v.FS.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	f, ok := wf.(*os.File)
	if !ok {
		return wf, nil
	}
	return newZeroedSegment(f, "", 0), nil
}

// zeroedSegment is one segment file open for writing (see segmentFS).
type zeroedSegment struct {
	f    *os.File
	size int64
	// dir is synced on the first Sync of a new file ("": not new).
	dir string

	// syncData is fdatasync (a test's stand-in).
	syncData func(*os.File) error

	// syncMu orders the file's syncs, the log's and the zeroer's. Linux
	// reports a failed writeback once, to the sync that sees it, and
	// marks the pages clean: a failed sync of the zeros may have lost
	// pages the log wrote meanwhile, so its error (syncErr) fails the
	// log's next sync and every one after it.
	syncMu  sync.Mutex
	syncErr error

	mu      sync.Mutex
	written int64 // end of the furthest write of the log
	zeroed  int64 // zeros written up to here, past written
	closed  bool
	running bool          // a zeroer goroutine is on
	stopped chan struct{} // closed when it has returned
}

// newZeroedSegment returns f, of size bytes, written and synced as
// segmentFS says; zeros go into it past its first write (none when size
// is 0).
func newZeroedSegment(f *os.File, dir string, size int64) *zeroedSegment {
	return &zeroedSegment{f: f, dir: dir, size: size, syncData: fdatasync}
}

// sync syncs the file, for the log or for the zeroer, and returns the
// first failure of any sync of the file.
func (s *zeroedSegment) sync() error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	if err := s.syncData(s.f); err != nil && s.syncErr == nil {
		s.syncErr = err
	}
	return s.syncErr
}

// WriteAt implements io.WriterAt. The write's end is published before the
// write, so that no zeros are written over it from then on.
func (s *zeroedSegment) WriteAt(p []byte, off int64) (int, error) {
	s.mu.Lock()
	if end := off + int64(len(p)); end > s.written {
		s.written = end
		if s.zeroed < end {
			s.zeroed = end
		}
	}
	s.mu.Unlock()
	return s.f.WriteAt(p, off)
}

// ReadAt implements io.ReaderAt.
func (s *zeroedSegment) ReadAt(p []byte, off int64) (int, error) { return s.f.ReadAt(p, off) }

// Sync implements types.WritableFile: fdatasync, the directory too on a
// new file's first sync; then it asks for more zeros ahead when less than
// half of zeroAhead is left. Once any sync of the file failed, its own
// or the zeroer's, every Sync fails.
func (s *zeroedSegment) Sync() error {
	if err := s.sync(); err != nil {
		return err
	}
	if s.dir != "" {
		if err := durable.SyncDir(s.dir); err != nil {
			return err
		}
		s.dir = ""
	}
	s.mu.Lock()
	if !s.closed && !s.running && s.zeroed < s.size && s.zeroed-s.written < zeroAhead/2 {
		s.running = true
		s.stopped = make(chan struct{})
		go s.zeroer()
	}
	s.mu.Unlock()
	return nil
}

// zeroer writes zeros up to zeroAhead past the log's writes, a piece at a
// time, syncs them and returns; Sync starts it again when the log has
// caught up by half of that.
func (s *zeroedSegment) zeroer() {
	s.mu.Lock()
	defer func() {
		s.running = false
		close(s.stopped)
		s.mu.Unlock()
	}()
	target := min(s.written+zeroAhead, s.size)
	for !s.closed && s.zeroed < target {
		from := (s.zeroed + pageSize - 1) / pageSize * pageSize
		to := min(from+zeroChunk, s.size)
		if from >= to {
			s.zeroed = s.size
			break
		}
		// Under the lock: a write of the log past from waits for this
		// piece, then writes over its zeros.
		if _, err := s.f.WriteAt(zeroPiece[:to-from], from); err != nil {
			s.zeroed = s.size // give up: the log works as it would without
			return
		}
		s.zeroed = to
		s.mu.Unlock()
		s.mu.Lock()
	}
	if s.closed {
		return
	}
	s.mu.Unlock()
	err := s.sync()
	s.mu.Lock()
	if err != nil {
		s.zeroed = s.size // no more zeros; the log's next Sync fails too
	}
}

// Close implements io.Closer, after the zeroer has stopped.
func (s *zeroedSegment) Close() error {
	s.mu.Lock()
	s.closed = true
	running, stopped := s.running, s.stopped
	s.mu.Unlock()
	if running {
		<-stopped
	}
	return s.f.Close()
}

// fdatasync syncs f's data and the metadata needed to read it back.
func fdatasync(f *os.File) error {
	raw, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		for {
			if serr = syscall.Fdatasync(int(fd)); serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	return nil
}
