package guard_test

import (
	"context"
	"errors"
	"strings"
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

// A guard pinned to a cluster refuses the tokens of its restore (another
// issuer epoch) and says that they come from a restore.
func TestCheckIssuer_RestoredCluster(t *testing.T) {
	for _, tt := range []struct{ pinned, presented string }{
		{"abc", "abc.e2"},    // pinned before the restore
		{"abc.e2", "abc"},    // a token of the old epoch at a re-pinned guard
		{"abc.e2", "abc.e3"}, // a second restore
	} {
		err := guard.CheckIssuer(guard.ContextWithIssuer(context.Background(), tt.presented), tt.pinned)
		if !errors.Is(err, fence.ErrIssuerMismatch) || !strings.Contains(err.Error(), "restored from a snapshot") {
			t.Errorf("pinned %q, presented %q: %v, want a mismatch naming the restore", tt.pinned, tt.presented, err)
		}
	}
	err := guard.CheckIssuer(guard.ContextWithIssuer(context.Background(), "xyz.e2"), "abc")
	if !errors.Is(err, fence.ErrIssuerMismatch) || strings.Contains(err.Error(), "restored") {
		t.Errorf("another cluster's epoch: %v, want a plain mismatch", err)
	}
}
