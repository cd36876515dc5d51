package fsm

import (
	"fmt"

	fence "github.com/fenced-dev/fenced"
)

// tokens is the one token counter of the cluster: every grant of every
// primitive takes its next value, so tokens never repeat or decrease. It
// is part of the snapshot (State.last_token).
type tokens struct {
	last fence.Token
}

// next returns the next token, or an error matching fence.ErrTokenOverflow
// at the end of the range. The counter only moves forward.
func (t *tokens) next() (fence.Token, error) {
	if t.exhausted() {
		return 0, t.overflow()
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
