package raftstore

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
)

// What a failed write does, checked in the sources (raft v1.8.0, raft-wal
// v0.4.1):
//
//   - A leader whose StoreLogs fails answers the entries' futures with the
//     error and steps down to follower (raft.dispatchLogs); a follower whose
//     StoreLogs fails rejects the AppendEntries (raft.appendEntries). Both
//     try again on the next write, so a log that can be written again
//     recovers on its own.
//   - raft panics when it cannot store its current term (setCurrentTerm)
//     and when a committed entry cannot be read back (processLogs): those
//     end the process.
//   - raft-wal rotates to a new segment after the write that fills the tail
//     (WAL.rotateSegmentLocked). When creating the new segment file fails,
//     the meta database already lists it but the WAL keeps its old, sealed
//     tail in memory and never tries again: every later append fails with
//     types.ErrSealed until the WAL is reopened, that is until the process
//     restarts (wal.Open creates the missing tail file).
//
// A node therefore cannot count on recovering in its process. It records
// every failed and every successful write; when appending to the log or
// storing the term and vote has failed for Config.DiskStallTimeout without
// a success, DiskStalled is closed and the server exits with an error, so
// that a supervisor restarts it: a restart reopens the log and, once the
// disk takes writes again, the node serves as before.

// The kinds of write a node makes to its data dir, the op of a DiskFailure
// and of Config.OnDiskError.
const (
	// DiskOpLogAppend is appending entries to the Raft log.
	DiskOpLogAppend = "log_append"
	// DiskOpLogSegment is creating the next log segment file (raft-wal
	// preallocates it), after the tail segment filled up.
	DiskOpLogSegment = "log_segment"
	// DiskOpLogTruncate is deleting log entries (compaction after a
	// snapshot, or a follower dropping a deposed leader's entries).
	DiskOpLogTruncate = "log_truncate"
	// DiskOpStable is storing the current term and vote.
	DiskOpStable = "stable"
	// DiskOpSnapshot is writing a snapshot.
	DiskOpSnapshot = "snapshot"
)

// ErrDiskStalled reports a node whose log or stable-store writes failed for
// Config.DiskStallTimeout without one success: it cannot serve writes, and
// may not recover without a restart.
var ErrDiskStalled = errors.New("raftstore: disk writes failing")

// DiskFailure is one kind of write whose last attempt failed.
type DiskFailure struct {
	// Op is the kind of write, one of the DiskOp constants.
	Op string
	// Err is the last error.
	Err error
	// Since is the first failure after the last success, Last the latest.
	Since, Last time.Time
	// Count is the number of failures since the last success.
	Count uint64
}

// DiskHealth is the state of a node's writes to its data dir.
type DiskHealth struct {
	// Failing lists the kinds of write whose last attempt failed, by Op.
	// A snapshot stays failing until the next snapshot succeeds.
	Failing []DiskFailure
	// Stalled is set, wrapping ErrDiskStalled, once the node has given up
	// (see Node.DiskStalled).
	Stalled error
}

// OK reports whether every kind of write succeeded last time.
func (h DiskHealth) OK() bool { return len(h.Failing) == 0 && h.Stalled == nil }

// DiskHealth returns the state of the node's writes now.
func (n *Node) DiskHealth() DiskHealth { return n.disk.health() }

// DiskStalled returns a channel closed when the node's log or stable-store
// writes have failed for Config.DiskStallTimeout without one success.
// The node does not stop by itself; the caller should shut it down and exit
// so that a supervisor restarts the process.
func (n *Node) DiskStalled() <-chan struct{} { return n.disk.stalled }

// opState is what the monitor knows of one kind of write.
type opState struct {
	err         error
	since, last time.Time
	count       uint64
}

// diskMonitor records the outcome of every write the stores make.
type diskMonitor struct {
	log        *slog.Logger
	onError    func(op string, err error)
	stallAfter time.Duration

	mu       sync.Mutex
	ops      map[string]*opState // failing ops only
	stallErr error
	stalled  chan struct{}
}

func newDiskMonitor(cfg Config, log *slog.Logger) *diskMonitor {
	return &diskMonitor{
		log:        log,
		onError:    cfg.OnDiskError,
		stallAfter: cfg.DiskStallTimeout,
		ops:        map[string]*opState{},
		stalled:    make(chan struct{}),
	}
}

// record notes the outcome of one write of kind op and returns err.
func (m *diskMonitor) record(op string, err error) error {
	if err == nil {
		m.mu.Lock()
		if s, ok := m.ops[op]; ok {
			delete(m.ops, op)
			m.mu.Unlock()
			m.log.Info("raft: disk writes succeed again", "op", op, "failed", s.count, "since", s.since)
			return nil
		}
		m.mu.Unlock()
		return nil
	}
	ret := err
	if errors.Is(err, types.ErrSealed) {
		err = fmt.Errorf("%w: raft-wal could not create its next segment (see log_segment) and does not try again; only a restart reopens the log", err)
	}
	if m.onError != nil {
		m.onError(op, err)
	}
	now := time.Now()
	m.mu.Lock()
	s, failing := m.ops[op]
	if !failing {
		s = &opState{since: now}
		m.ops[op] = s
	}
	s.err, s.last = err, now
	s.count++
	since := s.since
	m.mu.Unlock()

	m.log.Error("raft: disk write failed", "op", op, "err", err)
	if !failing && m.stallAfter > 0 && (op == DiskOpLogAppend || op == DiskOpStable) {
		time.AfterFunc(m.stallAfter, func() { m.checkStall(op, since) })
	}
	return ret
}

// checkStall gives up when op is still failing in the run of failures that
// began at since.
func (m *diskMonitor) checkStall(op string, since time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.ops[op]
	if !ok || !s.since.Equal(since) || m.stallErr != nil {
		return
	}
	m.stallErr = fmt.Errorf("%w: %s has failed %d times for %v with no success, last: %w", ErrDiskStalled, op, s.count, m.stallAfter.Round(time.Millisecond), s.err)
	close(m.stalled)
}

func (m *diskMonitor) health() DiskHealth {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := DiskHealth{Stalled: m.stallErr}
	for op, s := range m.ops {
		h.Failing = append(h.Failing, DiskFailure{Op: op, Err: s.err, Since: s.since, Last: s.last, Count: s.count})
	}
	sort.Slice(h.Failing, func(i, j int) bool { return h.Failing[i].Op < h.Failing[j].Op })
	return h
}

// monitoredLog is the log and stable store raft is given: the WAL, with
// every write's outcome recorded.
type monitoredLog struct {
	*logStore
	m *diskMonitor
}

// StoreLog implements raft.LogStore.
func (l monitoredLog) StoreLog(log *raft.Log) error {
	return l.m.record(DiskOpLogAppend, l.logStore.StoreLog(log))
}

// StoreLogs implements raft.LogStore.
func (l monitoredLog) StoreLogs(logs []*raft.Log) error {
	return l.m.record(DiskOpLogAppend, l.logStore.StoreLogs(logs))
}

// DeleteRange implements raft.LogStore.
func (l monitoredLog) DeleteRange(min, max uint64) error {
	return l.m.record(DiskOpLogTruncate, l.logStore.DeleteRange(min, max))
}

// Set implements raft.StableStore.
func (l monitoredLog) Set(key, val []byte) error {
	return l.m.record(DiskOpStable, l.logStore.Set(key, val))
}

// SetUint64 implements raft.StableStore.
func (l monitoredLog) SetUint64(key []byte, val uint64) error {
	return l.m.record(DiskOpStable, l.logStore.SetUint64(key, val))
}

// segmentFiler returns raft-wal's segment files in dir, with the outcome
// of every segment creation recorded: the cause of a stuck log (see above)
// that raft-wal itself only logs. A nil m records nothing.
func (m *diskMonitor) segmentFiler(dir string) types.SegmentFiler {
	f := segment.NewFiler(dir, newSegmentFS())
	if m == nil {
		return f
	}
	return monitoredFiler{SegmentFiler: f, dir: dir, m: m}
}

// monitoredFiler records the outcome of creating segment files.
type monitoredFiler struct {
	types.SegmentFiler
	dir string
	m   *diskMonitor
}

// Create implements types.SegmentFiler. The error recorded names the file
// (preallocating it fails with a bare errno).
func (f monitoredFiler) Create(info types.SegmentInfo) (types.SegmentWriter, error) {
	w, err := f.SegmentFiler.Create(info)
	var pathErr *iofs.PathError
	if err != nil && !errors.As(err, &pathErr) {
		f.m.record(DiskOpLogSegment, fmt.Errorf("create %s: %w", filepath.Join(f.dir, segment.FileName(info)), err))
		return w, err
	}
	return w, f.m.record(DiskOpLogSegment, err)
}

// monitoredSnapshots is the snapshot store raft is given, with the outcome
// of every snapshot written recorded.
type monitoredSnapshots struct {
	raft.SnapshotStore
	m *diskMonitor
}

// Create implements raft.SnapshotStore.
func (s monitoredSnapshots) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration, configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.SnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		return nil, s.m.record(DiskOpSnapshot, err)
	}
	return &monitoredSink{SnapshotSink: sink, m: s.m}, nil
}

// monitoredSink records a snapshot's failed writes and its outcome.
type monitoredSink struct {
	raft.SnapshotSink
	m      *diskMonitor
	failed bool
}

var _ io.Writer = (*monitoredSink)(nil)

// Write implements io.Writer.
func (s *monitoredSink) Write(p []byte) (int, error) {
	n, err := s.SnapshotSink.Write(p)
	if err != nil {
		s.failed = true
		s.m.record(DiskOpSnapshot, err)
	}
	return n, err
}

// Close implements raft.SnapshotSink: the snapshot is published, and
// counts as a success when every write and the close succeeded.
func (s *monitoredSink) Close() error {
	err := s.SnapshotSink.Close()
	if err != nil || !s.failed {
		s.m.record(DiskOpSnapshot, err)
	}
	return err
}
