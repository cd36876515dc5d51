package guard

import (
	"context"
	"fmt"

	fence "github.com/fenced-dev/fenced"
)

// Admit makes the checks every guard makes before it asks its store
// anything, in one order for all of them:
//
//  1. the issuer presented in ctx against pinned, the issuer the guard is
//     pinned to (CheckIssuer; an empty pinned accepts every issuer): an
//     error matching fence.ErrIssuerMismatch;
//  2. the token's range (fence.ValidateToken): an error matching
//     fence.ErrInvalidToken;
//  3. the object, with validObject (RequireObject, say; nil accepts every
//     object): its error, which should match fence.ErrInvalidArgument.
//
// It returns the first error and changes nothing. The guards of this
// module call it first in their Do (and in any method that does not go
// through Do), then apply the watermark rule inside their atomic step;
// Memory, pinned to no issuer and open to every object, needs only
// fence.Decide.
func Admit(ctx context.Context, pinned, object string, t fence.Token, validObject func(object string) error) error {
	if err := CheckIssuer(ctx, pinned); err != nil {
		return err
	}
	if err := fence.ValidateToken(t); err != nil {
		return err
	}
	if validObject != nil {
		return validObject(object)
	}
	return nil
}

// RequireObject rejects an empty object with an error matching
// fence.ErrInvalidArgument: the object names what the watermark protects,
// and "" protects nothing in particular. It is the object check of the
// guards whose objects are free-form strings (postgres, sqlfence).
func RequireObject(object string) error {
	if object == "" {
		return fmt.Errorf("%w: object is empty; name the protected object", fence.ErrInvalidArgument)
	}
	return nil
}
