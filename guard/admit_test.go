package guard_test

import (
	"context"
	"errors"
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
)

func TestAdmit(t *testing.T) {
	bg := context.Background()
	fromA := guard.ContextWithIssuer(bg, "a")
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		pinned string
		object string
		token  fence.Token
		valid  func(string) error
		want   error // matched with errors.Is; nil: admitted
	}{
		{"admitted", bg, "", "obj", 1, guard.RequireObject, nil},
		{"admitted, pinned", fromA, "a", "obj", fence.MaxToken, guard.RequireObject, nil},
		{"any object without a check", bg, "", "", 1, nil, nil},
		{"other issuer", guard.ContextWithIssuer(bg, "b"), "a", "obj", 1, guard.RequireObject, fence.ErrIssuerMismatch},
		{"no issuer presented", bg, "a", "obj", 1, guard.RequireObject, fence.ErrIssuerMismatch},
		{"token 0", bg, "", "obj", 0, guard.RequireObject, fence.ErrInvalidToken},
		{"token above MaxToken", bg, "", "obj", fence.MaxToken + 1, guard.RequireObject, fence.ErrInvalidToken},
		{"empty object", bg, "", "", 1, guard.RequireObject, fence.ErrInvalidArgument},
		// The order: issuer, then token, then object.
		{"issuer before token", bg, "a", "", 0, guard.RequireObject, fence.ErrIssuerMismatch},
		{"token before object", fromA, "a", "", 0, guard.RequireObject, fence.ErrInvalidToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := guard.Admit(tc.ctx, tc.pinned, tc.object, tc.token, tc.valid)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Admit=%v, want %v", err, tc.want)
			}
		})
	}
}
