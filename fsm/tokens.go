package fsm

import (
	"fmt"

	fence "github.com/fenced-dev/fenced"
)

// tokens is the one token counter of the cluster: every grant of every
// primitive takes its next value, so tokens never repeat or decrease. It
// is part of the snapshot (State.last_token), with its reservation
// (reservation.go).
type tokens struct {
	last fence.Token
	// reserved is the end of the reservation: no token above it is issued
	// before persist was told a new end. 0 until the first ReserveTokens
	// (a log written before reservations): then nothing is reserved.
	reserved fence.Token
	// block is how many tokens a reservation covers.
	block fence.Token
	// persist is told each new end of the reservation before a token
	// above the old end is issued (node-local; nil for none).
	persist func(end fence.Token)
}

// next returns the next token, or an error matching fence.ErrTokenOverflow
// at the end of the range. The counter only moves forward. With the
// reservation on, a token past its end first extends it by a block.
func (t *tokens) next() (fence.Token, error) {
	if t.exhausted() {
		return 0, t.overflow()
	}
	if t.block > 0 && t.last >= t.reserved {
		t.reserve()
	}
	t.last++
	return t.last, nil
}

// exhausted reports that no token is left: a primitive checks it before
// changing anything, so a grant that cannot get a token changes nothing.
func (t *tokens) exhausted() bool { return t.last >= fence.MaxToken }

func (t *tokens) overflow() error {
	return fmt.Errorf("%w: the last token %d is the maximum; start a new cluster", fence.ErrTokenOverflow, t.last)
}

// raise moves the counter up to floor; it never lowers it.
func (t *tokens) raise(floor fence.Token) {
	if floor > t.last {
		t.last = floor
	}
}
