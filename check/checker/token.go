package checker

import (
	"fmt"

	"github.com/fenced-dev/fenced/check/history"
)

// TokenOrder checks that tokens are issued in acquisition order and
// never reused (docs/design.md §1 condition 1, §2), from both sides.
//
// The clients' view, over the acquires that were granted (Kind acquire,
// Outcome OK):
//
//   - a token is granted once: it may be reported again only for the same
//     name and session (a session acquiring a lock it already holds gets
//     its grant again);
//   - per name, an acquire invoked after another acquire completed got a
//     higher token.
//
// The servers' view, over the committed events the nodes logged (Kind
// server_grant, server_release, server_expire; Process is the node, Seq
// the Raft index it applied them at):
//
//   - every node logged the same events at the same index (otherwise the
//     replicas diverged);
//   - merged, de-duplicated and ordered by index, granted tokens strictly
//     increase, over all names (one counter per cluster);
//   - every grant a client was told of was committed: a server_grant with
//     the same name, session and token exists. This rule applies only when
//     the history has server events, and only to acquires that completed
//     after the first of them was logged.
//
// Violations have Check "token-order".
func TokenOrder(h history.History) []Violation {
	v := newViolationSet(TokenOrderCheck)
	checkClientTokens(h, v)
	checkServerTokens(h, v)
	return v.list()
}

// grantKey identifies one grant.
type grantKey struct {
	name    string
	session uint64
	token   uint64
}

func checkClientTokens(h history.History, v *violationSet) {
	byName := map[string][]int{}
	byToken := map[uint64]int{}
	for i, op := range h {
		if op.Kind != history.OpAcquire || op.Outcome != history.OK {
			continue
		}
		if op.Token == 0 {
			v.add("zero token", fmt.Sprintf("lock %q: acquire was granted without a token (token 0 is never valid): %s", op.Name, opLabel(op)), op)
			continue
		}
		byName[op.Name] = append(byName[op.Name], i)
		if j, ok := byToken[op.Token]; !ok {
			byToken[op.Token] = i
		} else if p := h[j]; p.Name != op.Name || p.Session != op.Session {
			v.add("duplicate token", fmt.Sprintf("token %d was granted twice: lock %q to session %d (%s) and lock %q to session %d (%s)",
				op.Token, p.Name, p.Session, p.Process, op.Name, op.Session, op.Process), p, op)
		}
	}
	for _, name := range sortedMapKeys(byName) {
		for _, r := range realTimeInversions(h, byName[name]) {
			a, b := h[r.before], h[r.after]
			v.add("real-time order", fmt.Sprintf("lock %q: an acquire invoked %v after another completed with token %d was granted the lower token %d (%s; %s)",
				name, sinceCompleted(a, b), a.Token, b.Token, opLabel(a), opLabel(b)), a, b)
		}
	}
}

func checkServerTokens(h history.History, v *violationSet) {
	log := mergeServerEvents(h)
	if len(log.batches) == 0 {
		return
	}
	for _, d := range log.diverged {
		v.add("replica divergence", fmt.Sprintf("replicas diverged at log index %d: %s applied %s but %s applied %s",
			d.a.seq, d.a.node, describeBatch(d.a), d.b.node, describeBatch(d.b)), divergenceOps(d)...)
	}
	committed := map[grantKey]bool{}
	var last history.Op
	haveLast := false
	for _, b := range log.batches {
		for _, op := range b.events {
			if op.Kind != history.OpServerGrant {
				continue
			}
			committed[grantKey{op.Name, op.Session, op.Token}] = true
			if haveLast && op.Token <= last.Token {
				v.add("committed order", fmt.Sprintf("the cluster granted token %d (lock %q, session %d) at log index %d after it had granted token %d (lock %q, session %d) at index %d: tokens must strictly increase",
					op.Token, op.Name, op.Session, op.Seq, last.Token, last.Name, last.Session, last.Seq), last, op)
			}
			if !haveLast || op.Token > last.Token {
				last, haveLast = op, true
			}
		}
	}
	for _, op := range h {
		if op.Kind != history.OpAcquire || op.Outcome != history.OK || op.Token == 0 || op.Complete < log.first {
			continue
		}
		if !committed[grantKey{op.Name, op.Session, op.Token}] {
			v.add("uncommitted grant", fmt.Sprintf("%s was told it was granted lock %q with token %d (session %d), but no node logged that grant as committed",
				op.Process, op.Name, op.Token, op.Session), op)
		}
	}
}
