package checker

import (
	"fmt"
	"sort"
	"strings"

	"github.com/fenced-dev/fenced/check/history"
)

// queueItem names one item of one queue.
type queueItem struct {
	queue string
	item  uint64
}

// Queues checks the work queue's promises (docs/queue.md) on the workers'
// pushes, claims and acks and on the items the harness found at the end:
//
//   - an item is acked once: two acks of it answered OK are a violation
//     ("acked twice");
//   - an ack with a stale claim token changes nothing: an ack answered OK
//     whose token is not the token of a claim of the item answered OK, or
//     is below the token of another such claim, is a violation ("stale
//     ack accepted"; the workers' probes, acks sent on purpose with a
//     token one below their claim's, must all be refused);
//   - no item is lost: an item whose push was answered OK must, after
//     healing, have been acked (an ack answered OK or unknown, or refused
//     as stale where an SDK retry of an applied ack would be: the
//     single ack's refusal says the item was acked, and an ack in a
//     batch or with a claim that presented the item's latest claim token
//     may have been applied by its call's first attempt, since a stale
//     outcome there does not say why), or be found in its queue or its
//     dead-letter queue ("lost item"). The history cannot tell such a
//     retry from an item lost when that claim ended (expiry dropping it
//     instead of giving it back), whose late ack is refused as stale too:
//     that loss is not reported here, for the single ack as for the
//     others; the state machine's property test (fsm TestQueue_Properties)
//     tracks every ack and catches it. The rule is checked for the queues
//     the harness read to the end.
//
// Violations have Check "queue".
func Queues(h history.History) []Violation {
	v := newViolationSet(QueueCheck)
	claims := map[queueItem][]history.Op{}
	acks := map[queueItem][]history.Op{}
	mayBeAcked := map[queueItem]bool{}
	found := map[queueItem]bool{}
	complete := map[string]bool{}
	var pushed, staleAcks []history.Op
	for _, op := range h {
		k := queueItem{op.Name, op.Item}
		switch op.Kind {
		case history.OpPush:
			if op.Outcome == history.OK {
				pushed = append(pushed, op)
			}
		case history.OpClaim:
			if op.Outcome == history.OK {
				claims[k] = append(claims[k], op)
			}
		case history.OpAck:
			switch {
			case op.Outcome == history.OK:
				acks[k] = append(acks[k], op)
				mayBeAcked[k] = true
			case op.Outcome == history.Unknown && op.Result != "probe",
				op.Outcome == history.Stale && op.Result != "probe" && strings.Contains(op.Error, "was acked"):
				mayBeAcked[k] = true
			case op.Outcome == history.Stale && op.Result != "probe":
				staleAcks = append(staleAcks, op)
			}
		case history.OpQueueItem:
			if op.Result == "complete" {
				complete[op.Name] = true
			} else {
				found[k] = true
			}
		}
	}
	for _, a := range staleAcks {
		k := queueItem{a.Name, a.Item}
		latest := true
		for _, c := range claims[k] {
			latest = latest && c.Token <= a.Token
		}
		if latest {
			mayBeAcked[k] = true
		}
	}
	keys := make([]queueItem, 0, len(acks))
	for k := range acks {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].queue != keys[j].queue {
			return keys[i].queue < keys[j].queue
		}
		return keys[i].item < keys[j].item
	})
	for _, k := range keys {
		ok := acks[k]
		if len(ok) > 1 {
			v.add("acked twice", fmt.Sprintf("item %d of queue %q was acked %d times: %s and %s", k.item, k.queue, len(ok), opLabel(ok[0]), opLabel(ok[1])), ok...)
		}
		for _, a := range ok {
			var mine, later *history.Op
			for i, c := range claims[k] {
				if c.Token == a.Token {
					mine = &claims[k][i]
				} else if c.Token > a.Token && (later == nil || c.Token > later.Token) {
					later = &claims[k][i]
				}
			}
			switch {
			case mine == nil:
				v.add("stale ack accepted", fmt.Sprintf("item %d of queue %q was acked with token %d, which no claim of the item was granted: %s", k.item, k.queue, a.Token, opLabel(a)), a)
			case later != nil:
				v.add("stale ack accepted", fmt.Sprintf("item %d of queue %q was acked with claim token %d although it was claimed again with token %d: %s", k.item, k.queue, a.Token, later.Token, opLabel(a)), *mine, *later, a)
			}
		}
	}
	for _, p := range pushed {
		k := queueItem{p.Name, p.Item}
		if !complete[p.Name] || mayBeAcked[k] || found[k] {
			continue
		}
		cs := claims[k]
		if len(cs) > 3 {
			cs = cs[len(cs)-3:] // the push and its last three claims
		}
		v.add("lost item", fmt.Sprintf("item %d of queue %q (payload %q) was pushed, never acked, and is neither in the queue nor in %s.dead after healing", p.Item, p.Name, p.Value, p.Name),
			append([]history.Op{p}, cs...)...)
	}
	return v.list()
}
