package checker

import (
	"testing"

	"github.com/fenced-dev/fenced/check/history"
)

func TestCheckLostAcks(t *testing.T) {
	isFinal := func(key string) func(history.Op) bool {
		return func(op history.Op) bool { return op.Process == history.FinalProcess && op.Key == key }
	}
	tests := []struct {
		name      string
		h         history.History
		wantCheck string
		wantText  string
	}{
		{name: "handover", h: ckHandover()},
		{
			// The leader acknowledged version 5 and lost it in a failover:
			// the key reads back at version 4.
			name: "acknowledged write lost",
			h: ckReplace(ckHandover(), isFinal("lock-1"), func(op history.Op) history.Op {
				op.Value, op.Version, op.Token = "p2-2", 4, 5
				return op
			}),
			wantCheck: LostAckCheck, wantText: "the final read shows watermark 5, below token 7 of an acknowledged write",
		},
		{
			name: "key lost",
			h: ckReplace(ckHandover(), isFinal("lock-2"), func(op history.Op) history.Op {
				op.Outcome, op.Value, op.Version, op.Token = history.NotFound, "", 0, 0
				return op
			}),
			wantCheck: LostAckCheck, wantText: `key "lock-2": the final read found no key, but it had 1 acknowledged write`,
		},
		{
			name: "other value at the acknowledged version",
			h: ckReplace(ckHandover(), isFinal("lock-1"), func(op history.Op) history.Op {
				op.Value = "p3-9"
				return op
			}),
			wantCheck: LostAckCheck, wantText: `the final read shows value "p3-9" at version 5, but the write acknowledged as version 5 stored "p1-2"`,
		},
		{
			name:      "no final read",
			h:         ckWithout(ckHandover(), isFinal("lock-2")),
			wantCheck: LostAckCheck, wantText: `key "lock-2" has 1 acknowledged write (up to version 1) but the harness never read it at the end`,
		},
		{
			name: "final read timed out",
			h: ckReplace(ckHandover(), isFinal("lock-2"), func(op history.Op) history.Op {
				op.Outcome, op.Error, op.Value, op.Version, op.Token = history.Unknown, "context deadline exceeded", "", 0, 0
				return op
			}),
			wantCheck: LostAckCheck, wantText: "its final read did not answer (unknown: context deadline exceeded)",
		},
		{
			// A retried final read that answered counts.
			name: "final read retried",
			h: append(ckReplace(ckHandover(), isFinal("lock-2"), func(op history.Op) history.Op {
				op.Outcome, op.Error, op.Value, op.Version, op.Token = history.Unknown, "connection refused", "", 0, 0
				return op
			}), ckRead(history.FinalProcess, "lock-2", "p3-0", 1, 4, 303, 304)),
		},
		{
			// Unknown and rejected writes are not acknowledged.
			name: "only unacknowledged writes",
			h: history.History{
				ckUnknownWrite("p1", "k", 3, "p1-0", 0, 1000),
				ckStaleWrite("p2", "k", 2, "p2-0", 3, 10, 20),
				ckReadMissing(history.FinalProcess, "k", 2000, 2001),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ckWant(t, LostAcks(tt.h), tt.wantCheck, tt.wantText)
		})
	}
}
