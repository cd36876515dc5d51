package checker

import (
	"testing"

	"github.com/fenced-dev/fenced/check/history"
)

func TestCheckTokenOrder(t *testing.T) {
	tests := []struct {
		name      string
		h         history.History
		wantCheck string
		wantText  string
	}{
		{name: "handover", h: ckHandover()},
		{
			// A session acquiring a lock it holds is told its grant again.
			name: "re-acquire by the holder",
			h: history.History{
				ckAcquire("p1", "lock-1", 11, 3, 0, 10),
				ckAcquire("p1", "lock-1", 11, 3, 20, 30),
				ckAcquire("p2", "lock-1", 12, 4, 5, 40),
			},
		},
		{
			// Two sessions granted one token: a reused token after a
			// crash between "counter incremented" and "reply sent".
			name: "two sessions granted the same token",
			h: history.History{
				ckAcquire("p1", "lock-1", 11, 3, 0, 10),
				ckAcquire("p2", "lock-2", 12, 3, 2, 12),
			},
			wantCheck: TokenOrderCheck, wantText: "token 3 was granted twice",
		},
		{
			name: "same token, same lock, another session",
			h: history.History{
				ckAcquire("p1", "lock-1", 11, 3, 0, 10),
				ckAcquire("p2", "lock-1", 12, 3, 20, 30),
			},
			wantCheck: TokenOrderCheck, wantText: "token 3 was granted twice",
		},
		{
			// After a failover the new leader hands out a token below one
			// a client was already given.
			name: "lower token after an earlier grant completed",
			h: history.History{
				ckAcquire("p1", "lock-1", 11, 7, 0, 10),
				ckRelease("p1", "lock-1", 11, 7, 11, 12),
				ckAcquire("p2", "lock-1", 12, 5, 20, 30),
			},
			wantCheck: TokenOrderCheck, wantText: "was granted the lower token 5",
		},
		{
			// Concurrent acquires may complete in any order.
			name: "concurrent acquires",
			h: history.History{
				ckAcquire("p1", "lock-1", 11, 7, 0, 30),
				ckAcquire("p2", "lock-1", 12, 5, 5, 10),
			},
		},
		{
			// The token counter restarts from a stale snapshot: the
			// committed grants go down at increasing indexes.
			name: "tokens decrease across a restart",
			h: append(ckReplicate(ckNodes,
				ckEvent("", history.OpServerGrant, 5, "lock-1", 11, 3, 9),
				ckEvent("", history.OpServerRelease, 6, "lock-1", 11, 3, 20),
				ckEvent("", history.OpServerGrant, 7, "lock-2", 12, 4, 30),
				// restart: the counter was not in the snapshot
				ckEvent("", history.OpServerGrant, 9, "lock-1", 13, 1, 100),
				ckEvent("", history.OpServerGrant, 10, "lock-3", 14, 2, 110),
			), ckAcquire("p1", "lock-1", 11, 3, 0, 10),
				ckAcquire("p2", "lock-2", 12, 4, 25, 31),
				ckAcquire("p3", "lock-1", 13, 1, 95, 101)).Sorted(),
			wantCheck: TokenOrderCheck, wantText: "granted token 1 (lock \"lock-1\", session 13) at log index 9 after it had granted token 4",
		},
		{
			// n2 applied a different grant at index 6 than n1 and n3.
			name: "nodes disagree at one index",
			h: append(ckReplicate(ckNodes, ckEvent("", history.OpServerGrant, 5, "lock-1", 11, 3, 9)),
				ckEvent("n1", history.OpServerGrant, 6, "lock-2", 12, 4, 20),
				ckEvent("n2", history.OpServerGrant, 6, "lock-2", 13, 4, 21),
				ckEvent("n3", history.OpServerGrant, 6, "lock-2", 12, 4, 22),
			).Sorted(),
			wantCheck: TokenOrderCheck,
			wantText:  `replicas diverged at log index 6: n1 applied [grant "lock-2" to session 12 token 4] but n2 applied [grant "lock-2" to session 13 token 4]`,
		},
		{
			// A client was told of a grant that no node ever applied.
			name: "grant no server committed",
			h: append(ckReplicate(ckNodes,
				ckEvent("", history.OpServerGrant, 5, "lock-1", 11, 3, 9),
			), ckAcquire("p1", "lock-1", 11, 3, 0, 10),
				ckAcquire("p2", "lock-2", 12, 4, 20, 30)).Sorted(),
			wantCheck: TokenOrderCheck, wantText: "p2 was told it was granted lock \"lock-2\" with token 4 (session 12), but no node logged that grant",
		},
		{
			// Without server events, client grants are not matched.
			name: "no server events",
			h: history.History{
				ckAcquire("p1", "lock-1", 11, 3, 0, 10),
				ckAcquire("p2", "lock-2", 12, 4, 20, 30),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ckWant(t, TokenOrder(tt.h), tt.wantCheck, tt.wantText)
		})
	}
}

func TestMergeServerEvents(t *testing.T) {
	release := ckEvent("", history.OpServerRelease, 8, "lock-1", 11, 3, 50)
	grant := ckEvent("", history.OpServerGrant, 8, "lock-1", 12, 4, 50)
	first := ckEvent("", history.OpServerGrant, 5, "lock-1", 11, 3, 10)
	later := ckEvent("", history.OpServerGrant, 9, "lock-2", 13, 5, 60)
	at := func(op history.Op, node string, ms float64) history.Op {
		op.Process, op.Invoke, op.Complete = node, ckMs(ms), ckMs(ms)
		return op
	}
	tests := []struct {
		name        string
		h           history.History
		wantBatches []int // events per merged index
		wantDiverge int
	}{
		{
			name:        "replicated",
			h:           ckReplicate(ckNodes, first, release, grant, later),
			wantBatches: []int{1, 2, 1},
		},
		{
			// n1 re-applies its whole log after a restart.
			name: "re-applied after a restart",
			h: history.History{
				at(first, "n1", 10), at(release, "n1", 50), at(grant, "n1", 50),
				at(first, "n1", 100), at(release, "n1", 101), at(grant, "n1", 101), at(later, "n1", 102),
			},
			wantBatches: []int{1, 2, 1},
		},
		{
			// n2 was killed between the release and the grant of index
			// 8, then restarted and re-applied it whole.
			name: "cut short by a crash, then restarted",
			h: history.History{
				at(first, "n1", 10), at(release, "n1", 50), at(grant, "n1", 50), at(later, "n1", 60),
				at(first, "n2", 11), at(release, "n2", 51),
				at(first, "n2", 100), at(release, "n2", 101), at(grant, "n2", 101), at(later, "n2", 102),
			},
			wantBatches: []int{1, 2, 1},
		},
		{
			// n2 was killed between the release and the grant of index 8
			// and re-applies its log from index 8: the same index twice
			// in a row.
			name: "cut short by a crash, re-applied from that entry",
			h: history.History{
				at(first, "n1", 10), at(release, "n1", 50), at(grant, "n1", 50), at(later, "n1", 60),
				at(first, "n2", 11), at(release, "n2", 51),
				at(release, "n2", 101), at(grant, "n2", 101), at(later, "n2", 102),
			},
			wantBatches: []int{1, 2, 1},
		},
		{
			// n2 applied index 8 whole, then re-applies from index 8.
			name: "re-applied from the last entry",
			h: history.History{
				at(first, "n2", 11), at(release, "n2", 51), at(grant, "n2", 51),
				at(release, "n2", 101), at(grant, "n2", 101), at(later, "n2", 102),
			},
			wantBatches: []int{1, 2, 1},
		},
		{
			// n2 was killed for good between the release and the grant.
			name: "cut short by a crash at the end",
			h: history.History{
				at(first, "n2", 11), at(release, "n2", 51),
				at(first, "n1", 10), at(release, "n1", 50), at(grant, "n1", 50), at(later, "n1", 60),
			},
			wantBatches: []int{1, 2, 1},
		},
		{
			// n2 logged the release without the grant and went on to the
			// next index: it applied something else, not a crash.
			name: "missing event in the middle",
			h: history.History{
				at(first, "n1", 10), at(release, "n1", 50), at(grant, "n1", 50), at(later, "n1", 60),
				at(first, "n2", 11), at(release, "n2", 51), at(later, "n2", 61),
			},
			wantBatches: []int{1, 2, 1},
			wantDiverge: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log := mergeServerEvents(tt.h)
			var got []int
			for _, b := range log.batches {
				got = append(got, len(b.events))
			}
			if len(got) != len(tt.wantBatches) {
				t.Fatalf("batches %v, want %v", got, tt.wantBatches)
			}
			for i := range got {
				if got[i] != tt.wantBatches[i] {
					t.Fatalf("batches %v, want %v", got, tt.wantBatches)
				}
			}
			if len(log.diverged) != tt.wantDiverge {
				t.Errorf("len(diverged)=%d, want %d", len(log.diverged), tt.wantDiverge)
			}
		})
	}
}
