package fence

import "fmt"

// ValidateToken rejects a token outside 1..MaxToken with an error matching
// ErrInvalidToken that says what is allowed.
func ValidateToken(t Token) error {
	if !t.Valid() {
		return fmt.Errorf("%w: token %d is out of range; want 1 to %d", ErrInvalidToken, uint64(t), uint64(MaxToken))
	}
	return nil
}

// Decide applies the watermark rule of docs/design.md §5 to a token presented
// for object whose current watermark is mark (0 when the object has none).
// It returns the new watermark, a *StaleTokenError when the token is below
// the watermark, or an error matching ErrInvalidToken for a token outside
// 1..MaxToken. Guards that keep watermarks in Go call it inside the atomic
// step that also raises the watermark; guards whose check runs in the store
// (SQL, Lua) implement the same rule there and call ValidateToken first.
func Decide(object string, mark, presented Token) (Token, error) {
	if err := ValidateToken(presented); err != nil {
		return mark, err
	}
	if presented < mark {
		return mark, &StaleTokenError{Object: object, Presented: presented, Required: mark}
	}
	return presented, nil
}
