package guard_test

import (
	"context"
	"errors"
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
)

func TestMemory_Check(t *testing.T) {
	var g guard.Memory
	ctx := context.Background()
	steps := []struct {
		name     string
		token    fence.Token
		stale    bool
		required fence.Token
	}{
		{"first write", 5, false, 0},
		{"equal token accepted", 5, false, 0},
		{"higher token accepted", 9, false, 0},
		{"lower token rejected", 7, true, 9},
		{"equal to watermark again", 9, false, 0},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			err := g.Check(ctx, "obj", st.token)
			if !st.stale {
				if err != nil {
					t.Fatalf("Check(%d)=%v, want accepted", st.token, err)
				}
				return
			}
			var se *fence.StaleTokenError
			if !errors.As(err, &se) || !errors.Is(err, fence.ErrStaleToken) {
				t.Fatalf("Check(%d)=%v, want *StaleTokenError", st.token, err)
			}
			if se.Presented != st.token || se.Required != st.required {
				t.Fatalf("StaleTokenError{Presented: %d, Required: %d}, want {%d, %d}", se.Presented, se.Required, st.token, st.required)
			}
		})
	}
	if got := g.Watermark("obj"); got != 9 {
		t.Fatalf("Watermark()=%d, want 9", got)
	}
	if got := g.Watermark("other"); got != 0 {
		t.Fatalf("Watermark(other)=%d, want 0: watermarks are per object", got)
	}
}

func TestMemory_DoFailedApplyKeepsWatermark(t *testing.T) {
	var g guard.Memory
	g.Check(context.Background(), "obj", 3)
	if err := g.Do(context.Background(), "obj", 8, func(context.Context) error { return errors.New("disk full") }); err == nil {
		t.Fatal("Do returned nil for a failed apply")
	}
	if got := g.Watermark("obj"); got != 3 {
		t.Fatalf("Watermark()=%d after a failed apply, want 3", got)
	}
}
