package guard_test

import (
	"context"
	"errors"
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
)

func TestCheckIssuer(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name, pinned, presented string
		ok                      bool
	}{
		{"not pinned", "", "any", true},
		{"not pinned, none presented", "", "", true},
		{"same issuer", "abc", "abc", true},
		{"other issuer", "abc", "xyz", false},
		{"none presented", "abc", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := ctx
			if tt.presented != "" {
				c = guard.ContextWithIssuer(ctx, tt.presented)
			}
			err := guard.CheckIssuer(c, tt.pinned)
			if tt.ok != (err == nil) || (err != nil && !errors.Is(err, fence.ErrIssuerMismatch)) {
				t.Fatalf("CheckIssuer=%v, want ok=%v", err, tt.ok)
			}
		})
	}
}
