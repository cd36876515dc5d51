package fsm

import (
	"strings"
	"testing"

	fence "github.com/fenced-dev/fenced"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// checkInvariants catches a live-grant index that drifted from the locks:
// a grant missing, one too many, or one with another scope.
func TestLiveGrants_InvariantCatchesDrift(t *testing.T) {
	fresh := func() (*Machine, fence.Token) {
		m := New(nil)
		m.Apply(&statev1.Command{Op: &statev1.Command_Init{Init: &statev1.Init{Issuer: "test"}}})
		res := m.Apply(&statev1.Command{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Name: "orders", TtlMs: 1000}}})
		if !res.Granted {
			t.Fatalf("acquire: %+v", res)
		}
		if err := m.checkInvariants(); err != nil {
			t.Fatalf("healthy machine: %v", err)
		}
		return m, res.Grant.Token
	}
	for name, breakIt := range map[string]func(m *Machine, tok fence.Token){
		"missing": func(m *Machine, tok fence.Token) { delete(m.live.locks, tok) },
		"extra": func(m *Machine, tok fence.Token) {
			m.live.add(tok+1, liveGrant{kind: kindCode(fence.KindPermit), name: "b", scope: "b", session: 1})
		},
		"another lock": func(m *Machine, tok fence.Token) {
			l := *m.live.locks[tok]
			m.live.locks[tok] = &l
		},
		"in both maps": func(m *Machine, tok fence.Token) {
			m.live.add(tok, m.live.locks[tok].liveGrant())
		},
		"other scope, in the other map": func(m *Machine, tok fence.Token) {
			g := m.live.locks[tok].liveGrant()
			g.scope = "ord"
			delete(m.live.locks, tok)
			m.live.add(tok, g)
		},
		"other kind, in the other map": func(m *Machine, tok fence.Token) {
			g := m.live.locks[tok].liveGrant()
			g.kind = kindCode(fence.KindPermit)
			delete(m.live.locks, tok)
			m.live.add(tok, g)
		},
	} {
		m, tok := fresh()
		breakIt(m, tok)
		err := m.checkInvariants()
		if err == nil || !strings.Contains(err.Error(), "live-grant index") {
			t.Errorf("%s: checkInvariants = %v, want a live-grant index error", name, err)
		}
	}
}

// Every grant kind survives its byte code, and the codes are grantKinds'
// indexes.
func TestLiveGrant_KindCodes(t *testing.T) {
	for i, k := range grantKinds {
		if i == 0 {
			continue
		}
		if c := kindCode(k); int(c) != i || c.of() != k {
			t.Fatalf("kindCode(%q) = %d (%q), want %d", k, c, c.of(), i)
		}
	}
}
