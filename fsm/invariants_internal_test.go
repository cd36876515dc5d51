package fsm

import (
	"fmt"
	"strings"
	"testing"

	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// checkInvariants finds a session bound, as holder or waiter, to an
// object of any primitive that does not list it, among sessions that hold
// a lock of their own (so the bindings' counts, not a walk of them, are
// what the lock check compares first), at both state sizes (the checks
// one after the other, and side by side from parallelCheckSize).
func TestInvariants_StrayBindingFound(t *testing.T) {
	for _, n := range []int{3, parallelCheckSize} {
		for k := kindLock; k < numKinds; k++ {
			for _, waiting := range []bool{false, true} {
				t.Run(fmt.Sprintf("%d sessions/%s/waiting=%v", n, primitiveNames[k], waiting), func(t *testing.T) {
					m := New(nil)
					m.Apply(&statev1.Command{Op: &statev1.Command_Init{Init: &statev1.Init{Issuer: "test"}}})
					var last uint64
					for i := range n {
						res := m.Apply(&statev1.Command{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Name: fmt.Sprintf("l/%d", i), TtlMs: 1000}}})
						if !res.Granted {
							t.Fatalf("acquire: %+v", res)
						}
						last = res.Session
					}
					if err := m.checkInvariants(); err != nil {
						t.Fatalf("healthy machine: %v", err)
					}
					s := m.sessions[last]
					if waiting {
						s.wait(k, "ghost")
					} else {
						s.hold(k, "ghost")
					}
					err := m.checkInvariants()
					if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("session %d is bound as", last)) {
						t.Fatalf("checkInvariants = %v, want the stray binding of session %d named", err, last)
					}
				})
			}
		}
	}
}
