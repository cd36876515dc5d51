package raftstore_test

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"
)

// counter is a tiny state machine for the tests: every command adds one and
// returns the new count. It remembers the term of the last entry applied
// and how often it was restored from a snapshot.
type counter struct {
	mu       sync.Mutex
	n        uint64
	lastTerm uint64
	restores int
}

var _ raft.FSM = (*counter)(nil)

// Apply implements raft.FSM.
func (c *counter) Apply(l *raft.Log) any {
	c.mu.Lock()
	defer c.mu.Unlock()
	if string(l.Data) != "inc" {
		return fmt.Errorf("unknown command %q", l.Data)
	}
	c.n++
	c.lastTerm = l.Term
	return c.n
}

// Snapshot implements raft.FSM.
func (c *counter) Snapshot() (raft.FSMSnapshot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return counterSnapshot(c.n), nil
}

// Restore implements raft.FSM.
func (c *counter) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var b [8]byte
	if _, err := io.ReadFull(rc, b[:]); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n = binary.BigEndian.Uint64(b[:])
	c.restores++
	return nil
}

func (c *counter) get() (n uint64, restores int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n, c.restores
}

func (c *counter) term() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastTerm
}

type counterSnapshot uint64

// Persist implements raft.FSMSnapshot.
func (s counterSnapshot) Persist(sink raft.SnapshotSink) error {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(s))
	if _, err := sink.Write(b[:]); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

// Release implements raft.FSMSnapshot.
func (counterSnapshot) Release() {}
