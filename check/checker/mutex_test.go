package checker

import (
	"testing"

	"github.com/fenced-dev/fenced/check/history"
)

func TestCheckMutualExclusion(t *testing.T) {
	tests := []struct {
		name      string
		h         history.History
		wantCheck string
		wantText  string
	}{
		{name: "handover", h: ckHandover()},
		{name: "no server events", h: history.History{ckAcquire("p1", "lock-1", 11, 3, 0, 10)}},
		{
			// p1's session expired: the expiry frees its lock even though
			// no release was logged for it.
			name: "expiry frees every lock of the session",
			h: ckReplicate(ckNodes,
				ckEvent("", history.OpServerGrant, 5, "lock-1", 11, 3, 10),
				ckEvent("", history.OpServerGrant, 6, "lock-2", 11, 4, 20),
				ckEvent("", history.OpServerExpire, 7, "", 11, 0, 30),
				ckEvent("", history.OpServerGrant, 8, "lock-1", 12, 5, 40),
				ckEvent("", history.OpServerGrant, 9, "lock-2", 13, 6, 50),
			).Sorted(),
		},
		{
			// A new leader expires a live session's lock without logging
			// the release, and grants it on.
			name: "grant while held",
			h: ckReplicate(ckNodes,
				ckEvent("", history.OpServerGrant, 5, "lock-1", 11, 3, 10),
				ckEvent("", history.OpServerGrant, 8, "lock-1", 12, 4, 40),
			).Sorted(),
			wantCheck: MutualExclusionCheck, wantText: `lock "lock-1" was granted to session 12 (token 4) at log index 8 while session 11 held it (token 3, granted at index 5)`,
		},
		{
			// A release by a session that does not hold the lock frees
			// nothing.
			name: "release by another session",
			h: ckReplicate(ckNodes,
				ckEvent("", history.OpServerGrant, 5, "lock-1", 11, 3, 10),
				ckEvent("", history.OpServerRelease, 7, "lock-1", 99, 3, 30),
				ckEvent("", history.OpServerGrant, 8, "lock-1", 12, 4, 40),
			).Sorted(),
			wantCheck: MutualExclusionCheck, wantText: "while session 11 held it",
		},
		{
			// Within one index the node's order counts: the grant to the
			// next waiter before the release is a double grant.
			name: "grant before the release at one index",
			h: ckReplicate(ckNodes,
				ckEvent("", history.OpServerGrant, 5, "lock-1", 11, 3, 10),
				ckEvent("", history.OpServerGrant, 8, "lock-1", 12, 4, 40),
				ckEvent("", history.OpServerRelease, 8, "lock-1", 11, 3, 40),
			).Sorted(),
			wantCheck: MutualExclusionCheck, wantText: "while session 11 held it",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ckWant(t, MutualExclusion(tt.h), tt.wantCheck, tt.wantText)
		})
	}
}
