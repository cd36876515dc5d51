package fsm_test

import (
	"bytes"
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// kindLog records the kinds the Observer is told about.
type kindLog struct {
	fsm.NopObserver
	granted, released, waitEnded []fence.Kind
}

func (k *kindLog) Granted(g fence.Grant) { k.granted = append(k.granted, g.Kind) }
func (k *kindLog) Released(kd fence.Kind, _ string, _ uint64, _ fence.Token, _ int64, _ fsm.EndReason) {
	k.released = append(k.released, kd)
}
func (k *kindLog) WaitEnded(kd fence.Kind, _ string, _ uint64) { k.waitEnded = append(k.waitEnded, kd) }

// Every way a lock grant ends takes its token out of the live-grant index:
// release, expiry, close, revoke and a withdrawn acquire; a promoted
// waiter's grant enters it. The grant carries kind lock and its name as
// scope, and the Observer is told the kind of each grant, end and wait.
func TestLiveGrants_FollowEveryGrantAndEnd(t *testing.T) {
	obs := &kindLog{}
	m := fsm.New(obs)
	m.Apply(initCommand(0))
	live := func(tok fence.Token) bool { _, ok := m.GrantOf(tok); return ok }

	a, b := createSession(t, m), createSession(t, m)
	g := acquire(m, a, 1, "orders", false).Grant
	if g.Kind != fence.KindLock || g.Scope != "orders" || g.Name != "orders" {
		t.Fatalf("grant = %+v, want kind lock, scope orders", g)
	}
	if got, ok := m.GrantOf(g.Token); !ok || got != g {
		t.Fatalf("GrantOf(%d) = %+v, %v; want %+v", g.Token, got, ok, g)
	}
	if res := acquire(m, b, 1, "orders", true); !res.Queued {
		t.Fatalf("b did not queue: %+v", res)
	}
	release(m, a, 2, "orders")
	if live(g.Token) {
		t.Fatalf("released token %d is still live", g.Token)
	}
	g2 := m.Lock("orders").Holder
	if !live(g2.Token) || g2.Session != b {
		t.Fatalf("promoted grant %+v is not live", g2)
	}
	expire(m, b, 0)
	if live(g2.Token) {
		t.Fatalf("expired holder's token %d is still live", g2.Token)
	}

	c := createSession(t, m)
	g3 := acquire(m, c, 1, "x", false).Grant
	m.Apply(&statev1.Command{Op: &statev1.Command_CloseSession{CloseSession: &statev1.CloseSession{Session: c}}})
	if live(g3.Token) {
		t.Fatalf("closed session's token %d is still live", g3.Token)
	}

	d := createSession(t, m)
	g4 := acquire(m, d, 1, "y", false).Grant
	m.Apply(&statev1.Command{Op: &statev1.Command_Revoke{Revoke: &statev1.Revoke{Name: "y"}}})
	if live(g4.Token) {
		t.Fatalf("revoked token %d is still live", g4.Token)
	}

	e := createSession(t, m)
	g5 := acquire(m, e, 1, "z", false).Grant
	m.Apply(&statev1.Command{Op: &statev1.Command_Release{Release: &statev1.Release{Session: e, Seq: 2, Name: "z", WithdrawSeq: 1}}})
	if live(g5.Token) {
		t.Fatalf("withdrawn grant's token %d is still live", g5.Token)
	}

	f, h := createSession(t, m), createSession(t, m)
	acquire(m, f, 1, "w", false)
	acquire(m, h, 1, "w", true)
	expire(m, h, 0) // h leaves the queue without a grant

	for name, kinds := range map[string][]fence.Kind{"granted": obs.granted, "released": obs.released, "waitEnded": obs.waitEnded} {
		if len(kinds) == 0 {
			t.Errorf("no %s events", name)
		}
		for _, k := range kinds {
			if k != fence.KindLock {
				t.Errorf("%s event of kind %q, want lock", name, k)
			}
		}
	}
}

// The index is not in the snapshot: restore rebuilds it from the locks,
// and the restored machine's snapshot is the same bytes.
func TestLiveGrants_RebuiltOnRestore(t *testing.T) {
	m := newMachine(t)
	a, b := createSession(t, m), createSession(t, m)
	ga := acquire(m, a, 1, "orders", false).Grant
	gb := acquire(m, b, 1, "orders/17", false).Grant
	acquire(m, b, 2, "orders", true)
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	r := fsm.New(nil)
	if err := r.Restore(snap); err != nil {
		t.Fatal(err)
	}
	for _, g := range []fence.Grant{ga, gb} {
		got, ok := r.GrantOf(g.Token)
		if !ok || got.Kind != g.Kind || got.Scope != g.Scope || got.Session != g.Session || !got.IssuedAt.Equal(g.IssuedAt) {
			t.Errorf("restored GrantOf(%d) = %+v, %v; want %+v", g.Token, got, ok, g)
		}
	}
	again, err := r.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snap, again) {
		t.Fatal("snapshot after restore differs")
	}
}
