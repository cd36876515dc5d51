package raftstore_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/fenced-dev/fenced/raftstore"
)

// counter is a tiny state machine for the tests: every command "inc" adds
// one and returns the new count. Its commands are strings; an entry holding
// several is them joined by commas. It remembers the term of the last
// command applied and how often it was restored from a snapshot. The
// command "block" waits until block is closed (when it is set), which
// stalls the node's state machine; blocked, when set, is sent to (without
// waiting) as it starts to wait.
type counter struct {
	block    <-chan struct{}
	blocked  chan<- struct{}
	mu       sync.Mutex
	n        uint64
	lastTerm uint64
	restores int
}

var _ raftstore.StateMachine = (*counter)(nil)

// Size implements raftstore.Codec.
func (c *counter) Size(cmd any) int { return len(cmd.(string)) + 1 }

// Encode implements raftstore.Codec.
func (c *counter) Encode(cmds []any) ([]byte, error) {
	s := make([]string, len(cmds))
	for i, cmd := range cmds {
		s[i] = cmd.(string)
	}
	return []byte(strings.Join(s, ",")), nil
}

// Decode implements raftstore.Codec. The command "undecodable" stands for
// an entry that does not decode.
func (c *counter) Decode(entry []byte, dst []any) ([]any, error) {
	for cmd := range strings.SplitSeq(string(entry), ",") {
		if cmd == "undecodable" {
			return dst, errors.New("not a counter command")
		}
		dst = append(dst, cmd)
	}
	return dst, nil
}

// Apply implements raftstore.StateMachine.
func (c *counter) Apply(cmds []raftstore.Command) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, cmd := range cmds {
		if cmd.Cmd == "cannot go on" {
			return errors.New("the counter cannot go on")
		}
		if cmd.Cmd == "block" {
			if c.block != nil {
				if c.blocked != nil {
					select {
					case c.blocked <- struct{}{}:
					default:
					}
				}
				c.mu.Unlock()
				<-c.block
				c.mu.Lock()
			}
			cmds[i].Result = c.n
			continue
		}
		if cmd.Cmd != "inc" {
			cmds[i].Result = fmt.Errorf("unknown command %q", cmd.Cmd)
			continue
		}
		c.n++
		c.lastTerm = cmd.Term
		cmds[i].Result = c.n
	}
	return nil
}

// Snapshot implements raftstore.StateMachine.
func (c *counter) Snapshot() ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return binary.BigEndian.AppendUint64(nil, c.n), nil
}

// Restore implements raftstore.StateMachine.
func (c *counter) Restore(snapshot []byte) error {
	if len(snapshot) != 8 {
		return errors.New("counter snapshot is not 8 bytes")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n = binary.BigEndian.Uint64(snapshot)
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
