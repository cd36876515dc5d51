package checker

import (
	"testing"

	"github.com/fenced-dev/fenced/check/history"
)

func TestCheckStaleWrites(t *testing.T) {
	isStale := func(op history.Op) bool { return op.Kind == history.OpWrite && op.Outcome == history.Stale }
	tests := []struct {
		name      string
		h         history.History
		wantCheck string
		wantText  string
	}{
		{name: "handover", h: ckHandover()},
		{
			// The paused holder's write with token 3 is accepted after
			// p2's token 5 raised the watermark: an unfenced resource.
			name: "stale write accepted",
			h: ckReplace(ckHandover(), isStale, func(op history.Op) history.Op {
				op.Outcome, op.Required, op.Version = history.OK, 0, 3
				return op
			}),
			wantCheck: StaleWriteCheck, wantText: "write with token 3 was accepted as version 3 after version 2 had raised the watermark to token 5",
		},
		{
			// The same, before p2's write completed but committed after
			// it: commit order still rules it out.
			name: "stale write accepted concurrently",
			h: history.History{
				ckWrite("p2", "k", 5, "p2-0", 1, 0, 10),
				ckWrite("p1", "k", 3, "p1-0", 2, 1, 12),
			},
			wantCheck: StaleWriteCheck, wantText: "write with token 3 was accepted as version 2",
		},
		{
			name: "duplicate version",
			h: history.History{
				ckWrite("p1", "k", 3, "p1-0", 1, 0, 10),
				ckWrite("p2", "k", 4, "p2-0", 2, 11, 20),
				ckWrite("p3", "k", 4, "p3-0", 2, 12, 21),
			},
			wantCheck: StaleWriteCheck, wantText: "two accepted writes got version 2",
		},
		{
			// Versions and tokens agree, but the write with token 3 was
			// invoked after the one with token 5 had been acknowledged.
			name: "real-time order",
			h: history.History{
				ckWrite("p2", "k", 5, "p2-0", 2, 0, 10),
				ckWrite("p1", "k", 3, "p1-0", 1, 20, 30),
			},
			wantCheck: StaleWriteCheck, wantText: "invoked 10ms after a write with token 5 had been accepted",
		},
		{
			// Equal tokens are fine (several writes under one grant), and
			// so are writes to other keys with lower tokens.
			name: "equal tokens and other keys",
			h: history.History{
				ckWrite("p1", "a", 5, "p1-0", 1, 0, 10),
				ckWrite("p1", "a", 5, "p1-1", 2, 11, 20),
				ckWrite("p2", "b", 3, "p2-0", 1, 21, 30),
				ckStaleWrite("p3", "a", 4, "p3-0", 5, 31, 40),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ckWant(t, StaleWrites(tt.h), tt.wantCheck, tt.wantText)
		})
	}
}
