package checker

import (
	"testing"

	"github.com/fenced-dev/fenced/check/history"
)

// ckQueueOp is a worker's queue operation (push, claim or ack) of item of
// queue "q-0" with token and outcome.
func ckQueueOp(p string, kind history.Kind, item, token uint64, outcome string, inv, comp float64) history.Op {
	return history.Op{Process: p, Kind: kind, Name: "q-0", Item: item, Token: token, Value: "v", Outcome: outcome, Invoke: ckMs(inv), Complete: ckMs(comp)}
}

// ckProbe is an ack sent on purpose with a token that is not a claim's.
func ckProbe(p string, item, token uint64, outcome string, inv, comp float64) history.Op {
	op := ckQueueOp(p, history.OpAck, item, token, outcome, inv, comp)
	op.Result = "probe"
	return op
}

// ckQueueFinal is the harness's read of queue "q-0" at the end: items
// found (result "queued" or "dead") and the "complete" marker.
func ckQueueFinal(result string, item uint64) history.Op {
	return history.Op{Process: "final", Kind: history.OpQueueItem, Name: "q-0", Item: item, Result: result, Outcome: history.OK, Invoke: ckMs(1000), Complete: ckMs(1000)}
}

func TestCheckQueues(t *testing.T) {
	push := func(item uint64, at float64) history.Op {
		return ckQueueOp("p1", history.OpPush, item, 0, history.OK, at, at+1)
	}
	claim := func(p string, item, token uint64, at float64) history.Op {
		return ckQueueOp(p, history.OpClaim, item, token, history.OK, at, at+1)
	}
	ack := func(p string, item, token uint64, outcome string, at float64) history.Op {
		return ckQueueOp(p, history.OpAck, item, token, outcome, at, at+1)
	}
	complete := ckQueueFinal("complete", 0)
	tests := []struct {
		name      string
		h         history.History
		wantCheck string
		wantText  string
	}{
		{
			// Item 1 acked by its claimer (probe refused); item 2's
			// first claim expired, its redelivery acked, the first
			// claimer's late ack refused; item 3's ack unknown; item 4
			// still queued; item 5 dead-lettered; item 6's ack refused
			// because an SDK retry had already applied it.
			name: "every item accounted for",
			h: history.History{
				push(1, 0), push(2, 0), push(3, 0), push(4, 0), push(5, 0), push(6, 0),
				claim("p2", 1, 5, 10), ckProbe("p2", 1, 4, history.Stale, 12, 13), ack("p2", 1, 5, history.OK, 14),
				claim("p2", 2, 6, 10), claim("p3", 2, 9, 50), ack("p3", 2, 9, history.OK, 60), ack("p2", 2, 6, history.Stale, 70),
				claim("p2", 3, 7, 10), ack("p2", 3, 7, history.Unknown, 20),
				claim("p2", 6, 8, 10), func() history.Op {
					op := ack("p2", 6, 8, history.Stale, 20)
					op.Error = "item 6 was acked"
					return op
				}(),
				ckQueueFinal("queued", 4), ckQueueFinal("dead", 5), complete,
			},
		},
		{
			name:      "acked twice",
			h:         history.History{push(1, 0), claim("p2", 1, 5, 10), ack("p2", 1, 5, history.OK, 20), ack("p3", 1, 5, history.OK, 30)},
			wantCheck: QueueCheck, wantText: `item 1 of queue "q-0" was acked 2 times`,
		},
		{
			// A probe (token one below the claim's) was accepted.
			name:      "ack with a token never granted",
			h:         history.History{push(1, 0), claim("p2", 1, 5, 10), ckProbe("p2", 1, 4, history.OK, 12, 13)},
			wantCheck: QueueCheck, wantText: `item 1 of queue "q-0" was acked with token 4, which no claim of the item was granted`,
		},
		{
			name: "ack with a superseded claim",
			h: history.History{
				push(1, 0), claim("p2", 1, 5, 10), claim("p3", 1, 9, 50), ack("p2", 1, 5, history.OK, 60),
			},
			wantCheck: QueueCheck, wantText: `item 1 of queue "q-0" was acked with claim token 5 although it was claimed again with token 9`,
		},
		{
			name:      "lost item",
			h:         history.History{push(1, 0), claim("p2", 1, 5, 10), ack("p2", 1, 5, history.Fail, 20), complete},
			wantCheck: QueueCheck, wantText: `item 1 of queue "q-0" (payload "v") was pushed, never acked, and is neither in the queue nor in q-0.dead after healing`,
		},
		{
			// A refused probe is no ack: the item must still be found.
			name:      "lost item after a refused probe",
			h:         history.History{push(1, 0), claim("p2", 1, 5, 10), ckProbe("p2", 1, 4, history.Unknown, 12, 13), complete},
			wantCheck: QueueCheck, wantText: "was pushed, never acked",
		},
		{
			// A stale refusal of an ack in a batch (or with a claim)
			// does not say why: presenting the item's latest claim
			// token, it may be the retry of an applied ack.
			name: "batch ack of the latest claim refused as stale",
			h: history.History{
				push(1, 0), claim("p2", 1, 5, 10), claim("p3", 1, 9, 50), ack("p2", 1, 5, history.Stale, 55), ack("p3", 1, 9, history.Stale, 60), complete,
			},
		},
		{
			// ... but a stale refusal of a superseded claim's ack is a
			// refusal: the later claim's ack must account for the item.
			name: "lost item after a superseded claim's ack refused",
			h: history.History{
				push(1, 0), claim("p2", 1, 5, 10), claim("p3", 1, 9, 50), ack("p2", 1, 5, history.Stale, 55), complete,
			},
			wantCheck: QueueCheck, wantText: "was pushed, never acked",
		},
		{
			// The queue was not read to the end: nothing can be lost.
			name: "queue not read",
			h:    history.History{push(1, 0), claim("p2", 1, 5, 10)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ckWant(t, Queues(tt.h.Sorted()), tt.wantCheck, tt.wantText)
		})
	}
}
