package raftstore

import (
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/raft-wal/types"
)

// newTestMonitor returns a monitor that gives up after stallAfter and the
// errors it reported through OnDiskError, by op.
func newTestMonitor(stallAfter time.Duration) (*diskMonitor, func() map[string]int) {
	var mu sync.Mutex
	counts := map[string]int{}
	cfg := DefaultConfig()
	cfg.DiskStallTimeout = stallAfter
	cfg.OnDiskError = func(op string, err error) {
		mu.Lock()
		counts[op]++
		mu.Unlock()
	}
	m := newDiskMonitor(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	return m, func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]int{}
		for k, v := range counts {
			out[k] = v
		}
		return out
	}
}

// A failed write makes the health failing, names its op and error, and is
// counted; the next success of the same op makes it healthy again.
func TestDiskMonitor_FailureThenSuccess(t *testing.T) {
	m, counts := newTestMonitor(time.Hour)
	boom := errors.New("boom")
	if err := m.record(DiskOpLogAppend, boom); err != boom {
		t.Fatalf("record returned %v, want the write's own error", err)
	}
	m.record(DiskOpLogAppend, boom)
	h := m.health()
	if h.OK() || len(h.Failing) != 1 || h.Failing[0].Op != DiskOpLogAppend || h.Failing[0].Count != 2 || !errors.Is(h.Failing[0].Err, boom) {
		t.Fatalf("health after two failures = %+v, want log_append failing twice with boom", h)
	}
	if c := counts()[DiskOpLogAppend]; c != 2 {
		t.Errorf("OnDiskError called %d times for log_append, want 2", c)
	}
	// A success of another op does not clear it.
	m.record(DiskOpStable, nil)
	if m.health().OK() {
		t.Fatalf("a stable-store success cleared a log_append failure")
	}
	m.record(DiskOpLogAppend, nil)
	if h := m.health(); !h.OK() {
		t.Fatalf("health after a success = %+v, want OK", h)
	}
}

// Log appends that fail for the stall timeout without a success close
// DiskStalled, with an error wrapping ErrDiskStalled that says why.
func TestDiskMonitor_Stalls(t *testing.T) {
	m, _ := newTestMonitor(50 * time.Millisecond)
	m.record(DiskOpLogAppend, types.ErrSealed)
	select {
	case <-m.stalled:
	case <-time.After(5 * time.Second):
		t.Fatal("not stalled 5s after a failure with a 50ms stall timeout")
	}
	h := m.health()
	if !errors.Is(h.Stalled, ErrDiskStalled) || !errors.Is(h.Stalled, types.ErrSealed) || h.OK() {
		t.Fatalf("health = %+v, want Stalled wrapping ErrDiskStalled and the last error", h)
	}
}

// A success within the stall timeout restarts the clock, and snapshot
// failures never stall the node (they do not stop commits).
func TestDiskMonitor_NoStall(t *testing.T) {
	m, _ := newTestMonitor(100 * time.Millisecond)
	m.record(DiskOpStable, errors.New("transient"))
	m.record(DiskOpStable, nil)
	m.record(DiskOpSnapshot, errors.New("no space"))
	time.Sleep(300 * time.Millisecond)
	select {
	case <-m.stalled:
		t.Fatalf("stalled: %v", m.health().Stalled)
	default:
	}
	if h := m.health(); len(h.Failing) != 1 || h.Failing[0].Op != DiskOpSnapshot {
		t.Fatalf("health = %+v, want only the snapshot failing", h)
	}
}

// 0 never gives up.
func TestDiskMonitor_ZeroNeverStalls(t *testing.T) {
	m, _ := newTestMonitor(0)
	m.record(DiskOpLogAppend, errors.New("boom"))
	time.Sleep(50 * time.Millisecond)
	select {
	case <-m.stalled:
		t.Fatal("stalled with a stall timeout of 0")
	default:
	}
}

// failingSink is a snapshot sink whose writes fail.
type failingSink struct {
	raft.SnapshotSink
	closed bool
}

func (s *failingSink) Write([]byte) (int, error) { return 0, errors.New("write: no space") }
func (s *failingSink) Close() error              { s.closed = true; return nil }

// A snapshot whose write failed stays failing even when its sink closes
// without an error; the next complete snapshot clears it.
func TestMonitoredSink_FailedWriteStaysFailing(t *testing.T) {
	m, counts := newTestMonitor(time.Hour)
	sink := &monitoredSink{SnapshotSink: &failingSink{}, m: m}
	if _, err := sink.Write([]byte("state")); err == nil {
		t.Fatal("write did not fail")
	}
	sink.Close()
	if h := m.health(); len(h.Failing) != 1 || h.Failing[0].Op != DiskOpSnapshot {
		t.Fatalf("health = %+v, want the snapshot failing", h)
	}
	if c := counts()[DiskOpSnapshot]; c != 1 {
		t.Errorf("snapshot errors counted %d, want 1", c)
	}
	ok := &monitoredSink{SnapshotSink: &failingSink{}, m: m}
	ok.Close()
	if h := m.health(); !h.OK() {
		t.Fatalf("health after a complete snapshot = %+v, want OK", h)
	}
}
