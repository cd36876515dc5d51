package raftstore

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
)

// Durability of the log. Every entry Propose acknowledges must survive kill -9
// and power loss. What was checked in the sources (raft v1.8.0, raft-wal
// v0.4.1, bbolt v1.3.6). raft-wal v0.4.0 must not be used: after a
// follower truncated its log tail (entries of a deposed leader), a restart
// panicked with "sealed segment has no index block" (hashicorp/raft-wal#31,
// fixed in v0.4.1); the fault harness hit it after a kill.
//
//   - raft-wal WAL.StoreLogs → segment.Writer.Append ends every batch with
//     appendCommit → sync → flush (WriteAt) and then fsync of the segment
//     file (fs.File.Sync), before StoreLogs returns. The first Sync of a new
//     segment file also fsyncs its directory, so the file's entry survives.
//     There is no option to turn the fsync off.
//   - The stable store (CurrentTerm, LastVoteTerm, LastVoteCand) and the
//     WAL's segment list live in raft-wal's BoltMetaDB; each Set and each
//     segment-list change is one bbolt transaction, and bbolt's Commit calls
//     fdatasync unless DB.NoSync is set, which raft-wal never sets.
//   - hashicorp/raft calls StoreLogs before counting its own match index
//     (dispatchLogs on the leader) and before acknowledging AppendEntries (on
//     a follower), so an entry is committed only once a majority has it on
//     disk, and Propose returns only after commit and FSM apply.
//   - On restart, raft-wal recovers the tail segment up to its last complete
//     commit frame (segment.Writer.recoverTail), dropping a torn write, which
//     can only be a batch that was never acknowledged. raft-wal verifies no
//     other checksum, on open or on read; checkLog (walcheck.go) verifies
//     every batch before raft-wal opens the log and refuses a damaged one;
//     only a last write that a crash could have left unfinished is
//     dropped.
//   - raft reads entries through logCache (logcache.go), which holds an
//     entry only after StoreLogs above returned nil for it and is emptied
//     before every DeleteRange, so it answers only with what the log on
//     disk holds; it changes no write.
//   - raft.FileSnapshotStore fsyncs the snapshot's state and meta files and
//     its parent directory before a snapshot is published, and raft truncates
//     the log only after that.
//
// One thing raft-wal does not do: WAL.Close does not close the BoltMetaDB,
// whose file lock (bbolt flocks its file, waiting forever by default) would
// then block the next Open in the same process. openLogStore therefore
// passes its own BoltMetaDB and logStore.close closes it.

// logStore is raft-wal's WAL, which serves as both raft.LogStore and
// raft.StableStore, and the meta database it was opened with.
type logStore struct {
	*wal.WAL
	meta *metadb.BoltMetaDB
}

// openLogStore opens or creates the write-ahead log in dir, creating dir
// with mode 0700 when missing. It first verifies every batch of the log
// (checkLog) and refuses a damaged log with an error wrapping ErrDamaged;
// log receives the warning about a torn tail it accepts. disk, when not
// nil, records the creation of every segment file.
func openLogStore(dir string, segmentSize int, logger hclog.Logger, log *slog.Logger, disk *diskMonitor) (*logStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open raft log in %s: %w", dir, err)
	}
	meta := &metadb.BoltMetaDB{}
	persisted, err := meta.Load(dir)
	if err != nil {
		_ = meta.Close()
		return nil, fmt.Errorf("open raft log in %s: %w", dir, err)
	}
	if err := checkLog(dir, persisted.Segments, log); err != nil {
		_ = meta.Close()
		return nil, err
	}
	if err := recordBoot(dir); err != nil {
		_ = meta.Close()
		return nil, fmt.Errorf("open raft log in %s: record the boot id: %w", dir, err)
	}
	if segmentSize <= 0 {
		segmentSize = wal.DefaultSegmentSize
	}
	w, err := wal.Open(dir, wal.WithMetaStore(meta), wal.WithLogger(logger), wal.WithSegmentSize(segmentSize), wal.WithSegmentFiler(disk.segmentFiler(dir)))
	if err != nil {
		_ = meta.Close()
		return nil, fmt.Errorf("open raft log in %s: %w", dir, err)
	}
	return &logStore{WAL: w, meta: meta}, nil
}

// close closes the WAL and then its meta database.
func (s *logStore) close() error {
	return errors.Join(s.WAL.Close(), s.meta.Close())
}

// openSnapshotStore opens or creates the snapshot store in dir/snapshots.
func openSnapshotStore(dir string, retain int, logger hclog.Logger) (*raft.FileSnapshotStore, error) {
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, retain, logger)
	if err != nil {
		return nil, fmt.Errorf("open raft snapshots in %s: %w", filepath.Join(dir, "snapshots"), err)
	}
	return snaps, nil
}
