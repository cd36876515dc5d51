package checker

import (
	"fmt"
	"slices"
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
		if x.Kind != y.Kind || x.Name != y.Name || x.GrantKind != y.GrantKind || x.Scope != y.Scope || x.Session != y.Session || x.Token != y.Token || x.Result != y.Result {
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
			parts[i] = fmt.Sprintf("grant %s to session %d token %d", grantObject(op), op.Session, op.Token)
		case history.OpServerRelease:
			parts[i] = fmt.Sprintf("release %s by session %d token %d", grantObject(op), op.Session, op.Token)
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

// grantObject names what a grant or release is of: `"orders"` for a lock,
// `permit "pool/1"`, `read "cfg"`, `write "cfg"`, `leader "primary"` for the
// other kinds.
func grantObject(op history.Op) string {
	if op.IsLock() {
		return fmt.Sprintf("%q", op.Name)
	}
	if op.Scope != "" && op.Scope != op.Name {
		return fmt.Sprintf("%s %q", op.GrantKind, op.Scope)
	}
	return fmt.Sprintf("%s %q", op.GrantKind, op.Name)
}

// liveGrants are the grants in force while a checker replays the committed
// history: by name, each name's grants by token.
type liveGrants map[string]map[uint64]history.Op

func (l liveGrants) add(op history.Op) {
	if l[op.Name] == nil {
		l[op.Name] = map[uint64]history.Op{}
	}
	l[op.Name][op.Token] = op
}

// end removes the grant a server_release ended.
func (l liveGrants) end(op history.Op) {
	delete(l[op.Name], op.Token)
}

// expire removes every grant of a session (server_expire).
func (l liveGrants) expire(session uint64) {
	for _, gs := range l {
		for tok, g := range gs {
			if g.Session == session {
				delete(gs, tok)
			}
		}
	}
}

// of lists name's grants in force, by token.
func (l liveGrants) of(name string) []history.Op {
	out := make([]history.Op, 0, len(l[name]))
	for _, g := range l[name] {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Token < out[j].Token })
	return out
}

// replayGrants replays the committed history of the grants of kinds: it
// calls check with each grant before adding it to the grants in force,
// ends a grant at its release and every grant of a session at the
// session's expiry.
func replayGrants(h history.History, kinds []string, check func(live liveGrants, g history.Op)) {
	live := liveGrants{}
	for _, b := range mergeServerEvents(h).batches {
		for _, op := range b.events {
			switch {
			case op.Kind == history.OpServerExpire:
				live.expire(op.Session)
			case !slices.Contains(kinds, op.GrantKind):
			case op.Kind == history.OpServerGrant:
				check(live, op)
				live.add(op)
			case op.Kind == history.OpServerRelease:
				live.end(op)
			}
		}
	}
}
