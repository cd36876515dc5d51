package guard_test

import (
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
)

func TestMode_Validate(t *testing.T) {
	for _, tc := range []struct {
		mode guard.Mode
		g    fence.Guard
		ok   bool
	}{
		{guard.InHandler, nil, true},
		{guard.InHandler, &guard.Memory{}, true},
		{guard.AroundHandler, &guard.Memory{}, true},
		{guard.AroundHandler, nil, false},
		{guard.Mode(7), &guard.Memory{}, false},
	} {
		if err := tc.mode.Validate(tc.g); (err == nil) != tc.ok {
			t.Errorf("%v.Validate(guard %v)=%v, want ok=%v", tc.mode, tc.g != nil, err, tc.ok)
		}
	}
}

func TestMode_String(t *testing.T) {
	for m, want := range map[guard.Mode]string{guard.InHandler: "InHandler", guard.AroundHandler: "AroundHandler", 7: "Mode(7)"} {
		if got := m.String(); got != want {
			t.Errorf("String()=%q, want %q", got, want)
		}
	}
}
