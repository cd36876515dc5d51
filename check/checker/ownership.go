package checker

import (
	"fmt"

	"github.com/fenced-dev/fenced/check/history"
)

// Ownership checks that a session is acted for only by its creator
// (docs/design.md §10): every attempt a worker made to release, renew or
// close another worker's session with a wrong secret (OpHijack) must have
// done nothing. An attempt that took effect (Outcome OK: the victim's lock
// released, its session renewed or closed) is a violation; one without an
// answer (Unknown) is not judged. Violations have Check "ownership".
func Ownership(h history.History) []Violation {
	v := newViolationSet(OwnershipCheck)
	for _, op := range h {
		if op.Kind != history.OpHijack || op.Outcome != history.OK {
			continue
		}
		what := map[string]string{
			history.HijackRelease: fmt.Sprintf("released lock %q of session %d", op.Name, op.Session),
			history.HijackRenew:   fmt.Sprintf("renewed session %d", op.Session),
			history.HijackClose:   fmt.Sprintf("closed session %d", op.Session),
		}[op.Target]
		if what == "" {
			what = fmt.Sprintf("did %q for session %d", op.Target, op.Session)
		}
		victim := "a guessed id"
		if op.Value == "listed" {
			victim = "a session Status listed"
		}
		v.add(op.Target, fmt.Sprintf("%s %s (%s) with a wrong secret: only a session's creator may act for it", op.Process, what, victim), op)
	}
	return v.list()
}
