package guard

import (
	"fmt"

	fence "github.com/fenced-dev/fenced"
)

// Decide applies the watermark rule to a token presented for object whose
// current watermark is mark (0 when the object has none). It returns the new
// watermark, a *fence.StaleTokenError when the token is below the
// watermark, or an error matching fence.ErrInvalidToken for a token outside
// 1..fence.MaxToken. Guards that keep watermarks in Go call it inside the
// atomic step that also raises the watermark; guards whose check runs in
// the store (SQL, Lua) implement the same rule there and call
// ValidateToken first.
func Decide(object string, mark, presented fence.Token) (fence.Token, error) {
	if err := ValidateToken(presented); err != nil {
		return mark, err
	}
	if presented < mark {
		return mark, &fence.StaleTokenError{Object: object, Presented: presented, Required: mark}
	}
	return presented, nil
}

// ValidateToken rejects a token outside 1..fence.MaxToken with an error
// matching fence.ErrInvalidToken that says what is allowed.
func ValidateToken(t fence.Token) error {
	if !t.Valid() {
		return fmt.Errorf("%w: token %d is out of range; want 1 to %d", fence.ErrInvalidToken, uint64(t), uint64(fence.MaxToken))
	}
	return nil
}
