package fence

import "context"

// Guard is the check a protected resource makes before it applies a write:
// the watermark rule of DESIGN.md §5. For an object, a token below the
// highest token accepted so far is rejected with a *StaleTokenError; an equal
// token is accepted (repeated writes within one grant); a higher token is
// accepted and becomes the object's watermark.
//
// Implementations must make the check and the raise of the watermark one
// atomic step, and, where they also apply the write, make the write part of
// that same step. A guard that checks and then writes separately protects
// nothing.
type Guard interface {
	// Check applies the watermark rule to object with token t and records t
	// when it is accepted.
	Check(ctx context.Context, object string, t Token) error
}
