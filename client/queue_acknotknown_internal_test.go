package client

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	fence "github.com/fenced-dev/fenced"
)

// A claim call with acks that failed tells the acks as not known, never as
// the call's error: a retry whose claim had ended since its first attempt
// is refused as stale, and that first attempt may have applied the acks.
func TestAcksNotKnown_DoNotWrapTheCallsError(t *testing.T) {
	prev := []*Claim{{Scope: "jobs/7", Token: 41}, {Scope: "jobs/8", Token: 42}}
	callErr := fmt.Errorf("client: claim %q: %w: the claim of request seq 3 (token 43) has ended", "jobs", fence.ErrStaleToken)
	errs := acksNotKnown(prev, callErr)
	if len(errs) != len(prev) {
		t.Fatalf("%d ack errors for %d acks", len(errs), len(prev))
	}
	for i, err := range errs {
		if !errors.Is(err, ErrAckNotKnown) || errors.Is(err, fence.ErrStaleToken) {
			t.Errorf("ack error %d: %v; want ErrAckNotKnown and not ErrStaleToken", i, err)
		}
		if !strings.Contains(err.Error(), prev[i].Scope) || !strings.Contains(err.Error(), "has ended") {
			t.Errorf("ack error %d %q lacks its scope or the call's error", i, err)
		}
	}
}
