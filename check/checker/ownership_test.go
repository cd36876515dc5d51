package checker_test

import (
	"strings"
	"testing"

	"github.com/fenced-dev/fenced/check/checker"
	"github.com/fenced-dev/fenced/check/history"
)

// An attempt on another session that took effect is a violation naming
// the call and the victim; refused and unanswered ones are not.
func TestOwnership(t *testing.T) {
	hijack := func(call, outcome, how string) history.Op {
		return history.Op{Process: "p2", Kind: history.OpHijack, Target: call, Name: "lock-1", Session: 7, Value: how, Outcome: outcome}
	}
	h := history.History{
		hijack(history.HijackRelease, history.Fail, "listed"),
		hijack(history.HijackRenew, history.Unknown, "guessed"),
		hijack(history.HijackClose, history.Fail, "guessed"),
		{Process: "p1", Kind: history.OpRelease, Name: "lock-1", Session: 7, Outcome: history.OK},
	}
	if v := checker.Ownership(h); len(v) != 0 {
		t.Fatalf("refused attempts flagged: %v", v)
	}
	h = append(h, hijack(history.HijackRelease, history.OK, "listed"), hijack(history.HijackClose, history.OK, "guessed"))
	v := checker.Ownership(h)
	if len(v) != 2 || v[0].Check != checker.OwnershipCheck {
		t.Fatalf("violations %v, want 2 ownership violations", v)
	}
	for i, want := range []string{`p2 released lock "lock-1" of session 7 (a session Status listed)`, "p2 closed session 7 (a guessed id)"} {
		if !strings.Contains(v[i].Message, want) {
			t.Errorf("violation %q does not say %q", v[i].Message, want)
		}
	}
	if len(checker.All(h, checker.Options{})) < 2 {
		t.Fatal("checker.All does not run the ownership checker")
	}
}
