package fsm

import (
	"fmt"

	fence "github.com/fenced-dev/fenced"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// The token reservation: a high-water mark of the counter that survives a
// log that lost its tail (docs/design.md §2).
//
// The counter never passes tokens.reserved. Before a grant takes the first
// token past it, the Machine extends the reservation by a block and tells
// the new end to its persist hook, which the server implements by writing
// it to a node-local file with fsync before it returns; the grant's result
// reaches a client only after that. So every token any member handed out
// is at or below the reservation recorded on that member's disk. A leader
// taking over proposes ReserveTokens with its recorded end as floor: the
// counter restarts above every token it ever handed out, even when its log
// lost the entries of the last grants (a torn or damaged tail), and
// another member's state can only be higher (it holds the entries). The
// Machine does no I/O itself; the hook is node-local and outside the
// replicated state, and every member extends the reservation at the same
// entry, so snapshots stay equal.
//
// The reservation is off (reserved 0) until the first ReserveTokens, so a
// log written before it existed replays exactly as it did.

// maxReserveBlock is the largest block a ReserveTokens may ask for.
const maxReserveBlock = 1 << 20

// SetReservationHook sets the function told each new end of the token
// reservation, before a token above the previous end is issued. It runs
// inside Apply on the applying goroutine; it must not return before the
// end is durable, and must not call back into the Machine. A failure
// cannot be reported to the Machine: the caller stops applying (the
// server stops the node). It is node-local, not state: Restore keeps it.
func (m *Machine) SetReservationHook(persist func(end fence.Token)) {
	m.persist = persist
	m.tokens.persist = persist
}

// ReservedToken returns the end of the token reservation: no token above
// it has been issued. 0 while the reservation is off.
func (m *Machine) ReservedToken() fence.Token { return m.tokens.reserved }

// reserveTokens applies ReserveTokens: the counter is raised to the floor
// and to the end of the reservation so far, then the next block is
// reserved.
func (m *Machine) reserveTokens(r *statev1.ReserveTokens) Result {
	floor, block := r.GetFloor(), r.GetBlock()
	switch {
	case block == 0 || block > maxReserveBlock:
		return Result{Err: fmt.Errorf("%w: token reserve block %d is out of range; want 1 to %d", fence.ErrInvalidArgument, block, maxReserveBlock)}
	case floor > uint64(fence.MaxToken):
		return Result{Err: fmt.Errorf("%w: token reservation floor %d is above the maximum %d", fence.ErrInvalidArgument, floor, uint64(fence.MaxToken))}
	}
	m.tokens.raise(fence.Token(floor))
	m.tokens.raise(m.tokens.reserved)
	m.tokens.block = fence.Token(block)
	m.tokens.reserve()
	return Result{}
}

// reserve extends the reservation to a block past the counter, capped at
// the maximum token, and tells the hook.
func (t *tokens) reserve() {
	end := fence.MaxToken
	if t.last < fence.MaxToken-t.block {
		end = t.last + t.block
	}
	if end <= t.reserved {
		return
	}
	t.reserved = end
	if t.persist != nil {
		t.persist(end)
	}
}
