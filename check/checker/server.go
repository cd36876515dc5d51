package checker

import (
	"fmt"
	"sort"
	"strings"

	"github.com/fenced-dev/fenced/check/history"
)

// isServerEvent reports whether op is a committed event from a node's log.
func isServerEvent(op history.Op) bool {
	return op.Kind == history.OpServerGrant || op.Kind == history.OpServerRelease || op.Kind == history.OpServerExpire
}

// serverBatch is the events one node logged for one Raft index (Seq), in
// the node's order: a release and the grant to the next waiter share one
// index, as do an expiry and the releases it caused.
type serverBatch struct {
	seq    uint64
	node   string
	events []history.
		// truncatable is set when the node logged nothing for a later index
		// after this batch before it restarted (its Seq went back) or its log
		// ended: a node killed while applying the entry may have logged only
		// the first events of it.
		Op

	truncatable bool
}

// serverDivergence is two batches for one index that disagree.
type serverDivergence struct{ a, b serverBatch }

// serverLog is the committed history of the cluster: every node's events
// merged, one batch per index, ordered by index.
type serverLog struct {
	batches  []serverBatch
	diverged []serverDivergence
	// first is the earliest time a server event was logged.
	first int64
}

// mergeServerEvents merges the server events of every node in h, each
// node's in the order of h. A node re-applies its log after a restart and
// logs the same events again, at the same indexes: those are folded
// together. (A restart shows as an index that goes back, or as an event
// logged twice for one index when the node re-applies from the entry it
// was at.) Two nodes, or one node twice, that logged different events at
// one index are replicas that diverged, unless one batch is a prefix of
// the other and was cut short by the node's crash.
func mergeServerEvents(h history.History) serverLog {
	perNode := map[string][]serverBatch{}
	var log serverLog
	seen := false
	for _, op := range h {
		if !isServerEvent(op) {
			continue
		}
		if !seen || op.Invoke < log.first {
			log.first, seen = op.Invoke, true
		}
		bs := perNode[op.Process]
		// Events of one entry are all different; one the node already
		// logged for this entry means it restarted and is applying the
		// entry again.
		if n := len(bs); n > 0 && bs[n-1].seq == op.Seq && !hasServerEvent(bs[n-1].events, op) {
			bs[n-1].events = append(bs[n-1].events, op)
			continue
		}
		perNode[op.Process] = append(bs, serverBatch{seq: op.Seq, node: op.Process, events: []history.Op{op}})
	}
	canonical := map[uint64]serverBatch{}
	for _, node := range sortedMapKeys(perNode) {
		bs := perNode[node]
		for i := range bs {
			bs[i].truncatable = i == len(bs)-1 || bs[i+1].seq <= bs[i].seq
			b := bs[i]
			c, ok := canonical[b.seq]
			if !ok {
				canonical[b.seq] = b
				continue
			}
			switch {
			case sameServerEvents(c.events, b.events):
				if !b.truncatable {
					c.truncatable = false
					canonical[b.seq] = c
				}
			case len(c.events) < len(b.events) && c.truncatable && sameServerEvents(c.events, b.events[:len(c.events)]):
				canonical[b.seq] = b
			case len(b.events) < len(c.events) && b.truncatable && sameServerEvents(b.events, c.events[:len(b.events)]):
				// b was cut short; c has the whole entry.
			default:
				log.diverged = append(log.diverged, serverDivergence{a: c, b: b})
			}
		}
	}
	log.batches = make([]serverBatch, 0, len(canonical))
	for _, b := range canonical {
		log.batches = append(log.batches, b)
	}
	sort.Slice(log.batches, func(i, j int) bool { return log.batches[i].seq < log.batches[j].seq })
	sort.SliceStable(log.diverged, func(i, j int) bool { return log.diverged[i].a.seq < log.diverged[j].a.seq })
	return log
}

// hasServerEvent reports whether events holds one equal to op.
func hasServerEvent(events []history.Op, op history.Op) bool {
	for _, e := range events {
		if sameServerEvents([]history.Op{e}, []history.Op{op}) {
			return true
		}
	}
	return false
}

// sameServerEvents compares two nodes' events for one index.
func sameServerEvents(a, b []history.Op) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Kind != y.Kind || x.Name != y.Name || x.Session != y.Session || x.Token != y.Token || x.Result != y.Result {
			return false
		}
	}
	return true
}

// describeBatch lists a batch's events without node and index, which the
// message gives once.
func describeBatch(b serverBatch) string {
	parts := make([]string, len(b.events))
	for i, op := range b.events {
		switch op.Kind {
		case history.OpServerGrant:
			parts[i] = fmt.Sprintf("grant %q to session %d token %d", op.Name, op.Session, op.Token)
		case history.OpServerRelease:
			parts[i] = fmt.Sprintf("release %q by session %d token %d", op.Name, op.Session, op.Token)
			if op.Result != "" {
				parts[i] += " (" + op.Result + ")"
			}
		case history.OpServerExpire:
			parts[i] = fmt.Sprintf("expire session %d", op.Session)
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// divergenceOps picks a few events of two diverging batches: the first
// event where they differ from each, or the batches' first events.
func divergenceOps(d serverDivergence) []history.Op {
	a, b := d.a.events, d.b.events
	i := 0
	for i < len(a) && i < len(b) && sameServerEvents(a[i:i+1], b[i:i+1]) {
		i++
	}
	var ops []history.Op
	if i < len(a) {
		ops = append(ops, a[i])
	} else if len(a) > 0 {
		ops = append(ops, a[len(a)-1])
	}
	if i < len(b) {
		ops = append(ops, b[i])
	} else if len(b) > 0 {
		ops = append(ops, b[len(b)-1])
	}
	return ops
}
