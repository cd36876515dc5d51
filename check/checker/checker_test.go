package checker

import (
	"strings"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/check/history"
)

// ckBase is the start of the synthetic histories: 2026-01-01T00:00:00Z.
const ckBase = int64(1767225600) * int64(time.Second)

// ckMs is ckBase plus ms milliseconds.
func ckMs(ms float64) int64 { return ckBase + int64(ms*float64(time.Millisecond)) }

func ckAcquire(p, name string, session, token uint64, inv, comp float64) history.Op {
	return history.Op{Process: p, Kind: history.OpAcquire, Name: name, Session: session, Token: token, Outcome: history.OK, Invoke: ckMs(inv), Complete: ckMs(comp)}
}

func ckAcquireFailed(p, name, outcome string, inv, comp float64) history.Op {
	return history.Op{Process: p, Kind: history.OpAcquire, Name: name, Outcome: outcome, Error: "not granted", Invoke: ckMs(inv), Complete: ckMs(comp)}
}

func ckRelease(p, name string, session, token uint64, inv, comp float64) history.Op {
	return history.Op{Process: p, Kind: history.OpRelease, Name: name, Session: session, Token: token, Outcome: history.OK, Result: "released", Invoke: ckMs(inv), Complete: ckMs(comp)}
}

// ckWrite is an accepted write.
func ckWrite(p, key string, token uint64, value string, version uint64, inv, comp float64) history.Op {
	return history.Op{Process: p, Kind: history.OpWrite, Key: key, Token: token, Value: value, Outcome: history.OK, Version: version, Invoke: ckMs(inv), Complete: ckMs(comp)}
}

// ckStaleWrite is a write rejected for its token.
func ckStaleWrite(p, key string, token uint64, value string, required uint64, inv, comp float64) history.Op {
	return history.Op{Process: p, Kind: history.OpWrite, Key: key, Token: token, Value: value, Outcome: history.Stale, Required: required, Invoke: ckMs(inv), Complete: ckMs(comp)}
}

// ckUnknownWrite is a write that timed out.
func ckUnknownWrite(p, key string, token uint64, value string, inv, comp float64) history.Op {
	return history.Op{Process: p, Kind: history.OpWrite, Key: key, Token: token, Value: value, Outcome: history.Unknown, Error: "context deadline exceeded", Invoke: ckMs(inv), Complete: ckMs(comp)}
}

func ckRead(p, key, value string, version, token uint64, inv, comp float64) history.Op {
	return history.Op{Process: p, Kind: history.OpRead, Key: key, Value: value, Version: version, Token: token, Outcome: history.OK, Invoke: ckMs(inv), Complete: ckMs(comp)}
}

func ckReadMissing(p, key string, inv, comp float64) history.Op {
	return history.Op{Process: p, Kind: history.OpRead, Key: key, Outcome: history.NotFound, Invoke: ckMs(inv), Complete: ckMs(comp)}
}

// ckEvent is a committed server event as node logged it at index seq, at
// time at.
func ckEvent(node string, kind history.Kind, seq uint64, name string, session, token uint64, at float64) history.Op {
	op := history.Op{Process: node, Kind: kind, Seq: seq, Name: name, Session: session, Token: token, Invoke: ckMs(at), Complete: ckMs(at)}
	switch kind {
	case history.OpServerRelease:
		op.Result = "released"
	case history.OpServerExpire:
		op.Name, op.Token = "", 0
	}
	return op
}

// ckReplicate logs events on every node, each a little later than the
// one before.
func ckReplicate(nodes []string, events ...history.Op) history.History {
	var h history.History
	for i, n := range nodes {
		for _, e := range events {
			e.Process = n
			e.Invoke += int64(i) * int64(time.Millisecond) / 10
			e.Complete = e.Invoke
			h = append(h, e)
		}
	}
	return h
}

var ckNodes = []string{"n1", "n2", "n3"}

// ckHandover is a correct history of a lock changing hands under faults:
//
//   - p1 takes lock-1 (token 3), writes it, and is paused; its session
//     expires and p2, queued, is granted lock-1 (token 5) at the same index;
//   - p2 writes; p1 wakes up and writes with its old token: rejected;
//   - a write of p2 times out and was in fact applied; a later read sees it;
//   - p3 takes lock-2 (token 4) and writes it;
//   - every fault is healed at 200ms; then p1, p2 and p3 each get a grant;
//   - the final reads see every acknowledged write.
//
// Server events are logged by three nodes; n2 restarts at 150ms and
// re-applies its log.
func ckHandover() history.History {
	var h history.History
	h = append(h,
		ckAcquire("p1", "lock-1", 11, 3, 0, 10),
		ckReadMissing("p1", "lock-1", 12, 15),
		ckWrite("p1", "lock-1", 3, "p1-0", 1, 16, 20),
		ckRead("p1", "lock-1", "p1-0", 1, 3, 21, 24),
		ckAcquire("p2", "lock-1", 12, 5, 5, 60), // queued behind p1
		ckWrite("p2", "lock-1", 5, "p2-0", 2, 61, 65),
		ckStaleWrite("p1", "lock-1", 3, "p1-1", 5, 62, 70), // p1 woke up
		ckUnknownWrite("p2", "lock-1", 5, "p2-1", 71, 1071),
		ckRead("p2", "lock-1", "p2-1", 3, 5, 80, 82),
		ckWrite("p2", "lock-1", 5, "p2-2", 4, 83, 85),
		ckRelease("p2", "lock-1", 12, 5, 90, 95),
		ckAcquire("p3", "lock-2", 13, 4, 30, 35),
		ckWrite("p3", "lock-2", 4, "p3-0", 1, 36, 40),
		ckRelease("p3", "lock-2", 13, 4, 41, 45),
		history.Op{Process: "nemesis", Kind: history.OpFault, Fault: "pause", Target: "p1", Outcome: "started", Invoke: ckMs(25), Complete: ckMs(25)},
		history.Op{Process: "nemesis", Kind: history.OpFault, Fault: "all", Outcome: "healed", Invoke: ckMs(200), Complete: ckMs(200)},
		ckAcquire("p1", "lock-1", 14, 7, 201, 210),
		ckWrite("p1", "lock-1", 7, "p1-2", 5, 211, 215),
		ckRelease("p1", "lock-1", 14, 7, 216, 220),
		ckAcquire("p2", "lock-2", 15, 6, 190, 205), // in flight across the heal
		ckRelease("p2", "lock-2", 15, 6, 206, 208),
		ckAcquireFailed("p3", "lock-1", history.Fail, 211, 212),
		ckAcquire("p3", "lock-1", 16, 8, 221, 230),
		ckRelease("p3", "lock-1", 16, 8, 231, 235),
		ckRead(history.FinalProcess, "lock-1", "p1-2", 5, 7, 300, 301),
		ckRead(history.FinalProcess, "lock-2", "p3-0", 1, 4, 301, 302),
	)
	events := []history.Op{
		ckEvent("", history.OpServerGrant, 5, "lock-1", 11, 3, 9),
		ckEvent("", history.OpServerGrant, 7, "lock-2", 13, 4, 34),
		ckEvent("", history.OpServerRelease, 9, "lock-2", 13, 4, 44),
		// p1's session expires; p2 is next in the queue.
		ckEvent("", history.OpServerRelease, 12, "lock-1", 11, 3, 58),
		ckEvent("", history.OpServerGrant, 12, "lock-1", 12, 5, 58),
		ckEvent("", history.OpServerExpire, 12, "", 11, 0, 58),
		ckEvent("", history.OpServerRelease, 15, "lock-1", 12, 5, 94),
		ckEvent("", history.OpServerGrant, 18, "lock-2", 15, 6, 204),
		ckEvent("", history.OpServerRelease, 19, "lock-2", 15, 6, 207),
		ckEvent("", history.OpServerGrant, 20, "lock-1", 14, 7, 209),
		ckEvent("", history.OpServerRelease, 21, "lock-1", 14, 7, 219),
		ckEvent("", history.OpServerGrant, 22, "lock-1", 16, 8, 229),
		ckEvent("", history.OpServerRelease, 23, "lock-1", 16, 8, 234),
	}
	h = append(h, ckReplicate(ckNodes, events...)...)
	// n2 restarts and re-applies its log from index 5.
	for _, e := range events[:7] {
		e.Process = "n2"
		e.Invoke, e.Complete = ckMs(150), ckMs(150)
		h = append(h, e)
	}
	return h.Sorted()
}

// ckHandoverOptions are the options ckHandover passes with.
func ckHandoverOptions() Options {
	return Options{HealedAt: ckMs(200), LivenessBound: 50 * time.Millisecond, LiveProcesses: []string{"p1", "p2", "p3"}}
}

// ckWithout returns h without the ops for which drop is true.
func ckWithout(h history.History, drop func(history.Op) bool) history.History {
	var out history.History
	for _, op := range h {
		if !drop(op) {
			out = append(out, op)
		}
	}
	return out
}

// ckReplace returns h with every op for which match is true replaced by
// fix(op).
func ckReplace(h history.History, match func(history.Op) bool, fix func(history.Op) history.Op) history.History {
	out := append(history.History(nil), h...)
	for i, op := range out {
		if match(op) {
			out[i] = fix(op)
		}
	}
	return out
}

// ckWant checks that got is empty when wantCheck is "", and otherwise that
// it is not empty, that every violation is of wantCheck, and that some
// message contains wantText.
func ckWant(t *testing.T, got []Violation, wantCheck, wantText string) {
	t.Helper()
	if wantCheck == "" {
		for _, v := range got {
			t.Errorf("unexpected violation: %s: %s", v.Check, v.Message)
		}
		return
	}
	if len(got) == 0 {
		t.Fatalf("no violation, want a %s violation", wantCheck)
	}
	found := false
	for _, v := range got {
		if v.Check != wantCheck {
			t.Errorf("Check=%q, want %q (%s)", v.Check, wantCheck, v.Message)
		}
		if len(v.Ops) == 0 || len(v.Ops) > 4 {
			t.Errorf("violation has %d ops, want 1 to 4: %s", len(v.Ops), v.Message)
		}
		if strings.Contains(v.Message, wantText) {
			found = true
		}
		t.Logf("%s: %s", v.Check, v.Message)
	}
	if !found {
		t.Errorf("no message contains %q", wantText)
	}
}

func TestCheckAll_handover(t *testing.T) {
	ckWant(t, All(ckHandover(), ckHandoverOptions()), "", "")
}

func TestCheckAll_order(t *testing.T) {
	// A kv that accepts a paused holder's write, and loses it: several
	// checkers fail, in the documented order.
	h := ckReplace(ckHandover(), func(op history.Op) bool { return op.Kind == history.OpWrite && op.Outcome == history.Stale },
		func(op history.Op) history.Op { op.Outcome, op.Required, op.Version = history.OK, 0, 3; return op })
	got := All(h, ckHandoverOptions())
	order := map[string]int{StaleWriteCheck: 0, TokenOrderCheck: 1, MutualExclusionCheck: 2, LinearizabilityCheck: 3, LostAckCheck: 4, LivenessCheck: 5}
	seen := map[string]bool{}
	for i, v := range got {
		t.Logf("%s: %s", v.Check, v.Message)
		seen[v.Check] = true
		if i > 0 && order[got[i-1].Check] > order[v.Check] {
			t.Errorf("%s reported after %s", v.Check, got[i-1].Check)
		}
	}
	for _, c := range []string{StaleWriteCheck, LinearizabilityCheck} {
		if !seen[c] {
			t.Errorf("no %s violation", c)
		}
	}
	again := All(h, ckHandoverOptions())
	if len(again) != len(got) {
		t.Fatalf("second run: %d violations, first %d", len(again), len(got))
	}
	for i := range got {
		if again[i].Message != got[i].Message {
			t.Errorf("violation %d: second run %q, first %q", i, again[i].Message, got[i].Message)
		}
	}
}

func TestViolationSet_cap(t *testing.T) {
	v := newViolationSet(TokenOrderCheck)
	for i := 0; i < maxViolationsPerRule+5; i++ {
		v.add("committed order", "bad", history.Op{})
	}
	v.add("duplicate token", "bad", history.Op{})
	got := v.list()
	if len(got) != maxViolationsPerRule+2 {
		t.Fatalf("len(list())=%d, want %d", len(got), maxViolationsPerRule+2)
	}
	if last := got[len(got)-1].Message; !strings.Contains(last, "5 more committed order violations") {
		t.Errorf("last message %q, want a count of the 5 not shown", last)
	}
}
