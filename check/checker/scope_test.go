package checker_test

import (
	"strings"
	"testing"

	"github.com/fenced-dev/fenced/check/checker"
	"github.com/fenced-dev/fenced/check/history"
)

// Accepted writes within their grant's scope (the key itself, a child of
// it) pass, and refused cross-scope writes are not judged; an accepted
// write of a prefix neighbour, of a permit's parent, with a read token or
// with a token no committed grant has is a violation of its rule.
func TestScopes(t *testing.T) {
	grant := func(token uint64, kind, name, scope string) history.Op {
		return history.Op{Process: "n1", Kind: history.OpServerGrant, GrantKind: kind, Name: name, Scope: scope, Token: token, Seq: token}
	}
	write := func(key string, token uint64, outcome, attack string) history.Op {
		return history.Op{Process: "p1", Kind: history.OpWrite, Key: key, Token: token, Outcome: outcome, Target: attack, Value: "v"}
	}
	h := history.History{
		grant(1, history.GrantLock, "lock-1", "lock-1"),
		grant(2, history.GrantPermit, "sem-0", "sem-0/1"),
		grant(3, history.GrantRead, "rw-0", "rw-0"),
		grant(4, "", "lock-2", ""), // recorded before kinds and scopes: a lock of scope "lock-2"
		write("lock-1", 1, history.OK, ""),
		write("lock-1/child", 1, history.OK, ""),
		write("sem-0/1", 2, history.OK, ""),
		write("lock-2", 4, history.OK, ""),
		write("lock-10", 1, history.Fail, "prefix-neighbour"),
		write("sem-0", 2, history.Fail, "parent"),
		write("rw-0", 3, history.Unknown, "read-token"),
		write("lock-2", 1, history.Stale, "other-object"),
	}
	if v := checker.Scopes(h); len(v) != 0 {
		t.Fatalf("in-scope and refused writes flagged: %v", v)
	}
	h = append(h,
		write("lock-10", 1, history.OK, "prefix-neighbour"),
		write("sem-0", 2, history.OK, "parent"),
		write("lock-", 4, history.OK, "cut-short"),
		write("rw-0", 3, history.OK, "read-token"),
		write("lock-1", 99, history.OK, ""),
	)
	v := checker.Scopes(h)
	want := []string{
		`key "lock-10": write with token 1 of the lock grant of scope "lock-1" was accepted (the prefix-neighbour attack)`,
		`key "sem-0": write with token 2 of the permit grant of scope "sem-0/1" was accepted (the parent attack)`,
		`key "lock-": write with token 4 of the lock grant of scope "lock-2"`,
		`key "rw-0": write with token 3 of the read grant of "rw-0" was accepted (the read-token attack)`,
		`key "lock-1": write with token 99 was accepted, but no committed grant has that token`,
	}
	if len(v) != len(want) {
		t.Fatalf("violations %v, want %d", v, len(want))
	}
	for i, w := range want {
		if v[i].Check != checker.ScopeCheck || !strings.Contains(v[i].Message, w) {
			t.Errorf("violation %d: %s %q, want scope saying %q", i, v[i].Check, v[i].Message, w)
		}
	}
	// Without server events the grants are unknown: nothing to judge.
	if v := checker.Scopes(history.History{write("lock-1", 99, history.OK, "")}); len(v) != 0 {
		t.Errorf("a history without server events: %v", v)
	}
	if got := checker.All(h, checker.Options{}); !hasCheck(got, checker.ScopeCheck) {
		t.Fatal("checker.All does not run the scope checker")
	}
}

func hasCheck(vs []checker.Violation, check string) bool {
	for _, v := range vs {
		if v.Check == check {
			return true
		}
	}
	return false
}
