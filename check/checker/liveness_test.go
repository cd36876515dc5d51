package checker

import (
	"testing"
	"time"

	"github.com/fenced-dev/fenced/check/history"
)

func TestCheckLiveness(t *testing.T) {
	o := ckHandoverOptions()
	tests := []struct {
		name      string
		h         history.History
		o         Options
		wantCheck string
		wantText  string
	}{
		{name: "handover", h: ckHandover(), o: o},
		{
			name: "liveness not checked",
			h:    ckWithout(ckHandover(), func(op history.Op) bool { return op.Process == "p3" }),
			o:    Options{LiveProcesses: o.LiveProcesses},
		},
		{
			// p3 is refused after the heal and never tries again: a lock
			// left held by a session nobody expires.
			name: "no grant after healing",
			h: ckWithout(ckHandover(), func(op history.Op) bool {
				return op.Process == "p3" && op.Kind == history.OpAcquire && op.Outcome == history.OK && op.Invoke > ckMs(200)
			}),
			o:         o,
			wantCheck: LivenessCheck, wantText: "process p3 got no grant within 50ms after every fault was healed (1 acquire completed after the heal, none granted)",
		},
		{
			name:      "granted too late",
			h:         ckHandover(),
			o:         Options{HealedAt: o.HealedAt, LivenessBound: 25 * time.Millisecond, LiveProcesses: o.LiveProcesses},
			wantCheck: LivenessCheck, wantText: "process p3 got no grant within 25ms after every fault was healed (2 acquires completed after the heal, 1 granted but too late)",
		},
		{
			// Only grants before the heal.
			name: "grants only before healing",
			h: history.History{
				ckAcquire("p1", "lock-1", 11, 3, 0, 10),
				ckAcquireFailed("p1", "lock-1", history.Unknown, 150, 1150),
			},
			o:         Options{HealedAt: ckMs(200), LiveProcesses: []string{"p1"}},
			wantCheck: LivenessCheck, wantText: "process p1 got no grant before the history ended",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Liveness(tt.h, tt.o)
			ckWant(t, got, tt.wantCheck, tt.wantText)
		})
	}
}

func TestCheckLiveness_noOperations(t *testing.T) {
	got := Liveness(ckHandover(), Options{HealedAt: ckMs(200), LiveProcesses: []string{"p1", "p9"}})
	want := "process p9 got no grant before the history ended after every fault was healed: it recorded no operations at all"
	if len(got) != 1 || got[0].Check != LivenessCheck || got[0].Message != want {
		t.Fatalf("Liveness()=%+v, want one violation %q", got, want)
	}
}
