package raftstore

import (
	"sync"
	"unsafe"
)

// proposedEntries hands the leader's state machine the commands of the
// entries this node proposed, so that it does not decode what it encoded
// a moment before (decoding them was 4-10 % of a leader's CPU in the
// queue batch benchmark's profiles). An entry is known by its data: the
// address of its first byte and its length. hashicorp/raft hands the FSM
// the very slice given to Apply while the entry is in flight on the node
// that proposed it; an entry read back from the log (a follower's, one
// applied after a restart, or after its proposal failed) is a slice of
// its own and is decoded. The commands stand for exactly those bytes: the
// proposer encoded them from these commands, which nothing changes
// afterwards (Propose's callers hand a command over for good), and the
// registration, which keeps the data alive (so its address is not
// reused), ends when the proposal returns, applied or not.
type proposedEntries struct {
	mu sync.Mutex
	m  map[*byte]proposedEntry
}

// proposedEntry is one entry's data length and commands.
type proposedEntry struct {
	n    int
	cmds []any
}

// add registers the commands that data encodes.
func (p *proposedEntries) add(data []byte, cmds []any) {
	if len(data) == 0 {
		return
	}
	p.mu.Lock()
	if p.m == nil {
		p.m = make(map[*byte]proposedEntry)
	}
	p.m[unsafe.SliceData(data)] = proposedEntry{n: len(data), cmds: cmds}
	p.mu.Unlock()
}

// take returns and forgets the commands registered for data, if it is
// the slice they were registered with.
func (p *proposedEntries) take(data []byte) ([]any, bool) {
	if len(data) == 0 {
		return nil, false
	}
	k := unsafe.SliceData(data)
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.m[k]
	if !ok || e.n != len(data) {
		return nil, false
	}
	delete(p.m, k)
	return e.cmds, true
}

// remove forgets data's registration (its proposal returned).
func (p *proposedEntries) remove(data []byte) {
	if len(data) == 0 {
		return
	}
	p.mu.Lock()
	delete(p.m, unsafe.SliceData(data))
	p.mu.Unlock()
}

// len is how many entries are registered (tests).
func (p *proposedEntries) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.m)
}
