package fence

import "context"

// Guard is the check a protected resource makes around a write: the
// watermark rule of docs/design.md §5, performed atomically with the write.
//
// Do applies the rule to token t for object and, only when t is accepted,
// calls apply; the check, apply and the raise of the watermark to t must be
// one atomic step: no other Do for the same object may check or apply in
// between, or the step behaves as if none had (an optimistic guard checks
// again before it commits what apply did, as redisfence does). When apply
// returns an error, Do returns that error unchanged (so
// errors.Is and errors.As see it) and the watermark stays unchanged, with
// one exception a guard must document: a guard whose store cannot undo
// what apply wrote (a file system) may keep the watermark it raised before
// calling apply. Keeping it only makes older tokens fail; lowering it again
// could let an older token overwrite what apply wrote before it failed.
// Do calls apply at most once and passes it a context derived from ctx; a
// guard may put its transaction into that context for apply to use. A nil
// apply makes Do a bare check that records t when it is accepted.
//
// Do returns a *StaleTokenError when t is below the watermark, an error
// matching ErrInvalidToken when t is outside 1..MaxToken, and an error
// matching ErrIssuerMismatch when the guard is pinned to an issuer and the
// one presented with the request differs.
//
// A guard that checks and then writes separately protects nothing: a check
// followed by a separate write is exactly the race fencing exists to close.
type Guard interface {
	Do(ctx context.Context, object string, t Token, apply func(ctx context.Context) error) error
}

// GuardFunc adapts a function to the Guard interface.
type GuardFunc func(ctx context.Context, object string, t Token, apply func(ctx context.Context) error) error

var _ Guard = GuardFunc(nil)

// Do implements Guard by calling f.
func (f GuardFunc) Do(ctx context.Context, object string, t Token, apply func(ctx context.Context) error) error {
	return f(ctx, object, t, apply)
}
