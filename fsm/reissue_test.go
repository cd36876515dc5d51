package fsm_test

import (
	"errors"
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// A restored state is a new issuer epoch: the kv and its watermarks stay,
// every session and grant of the old issuer is gone, the lineage names the
// old issuer, and the first grant is above the floor.
func TestRestored_StartsANewEpochAboveTheFloor(t *testing.T) {
	old := goldenState(t)
	snap := mustSnapshot(t, old)
	floor := old.LastToken() + 1000
	out, issuer, err := fsm.Restored(snap, fsm.Reissue{Floor: floor, RestoredAtUnixMs: 5, SnapshotIndex: 9, SavedAtUnixMs: 4})
	if err != nil {
		t.Fatal(err)
	}
	if issuer != "golden.e2" {
		t.Fatalf("issuer %q, want golden.e2", issuer)
	}
	m := fsm.New(nil)
	if err := m.Restore(out); err != nil {
		t.Fatal(err)
	}
	if m.Issuer() != issuer || m.LastToken() != floor || len(m.Sessions()) != 0 || m.Lock("alpha").Held() || m.LeaderTerm() != 0 {
		t.Fatalf("restored: issuer %q, last %d, %d sessions, alpha held %v, term %d", m.Issuer(), m.LastToken(), len(m.Sessions()), m.Lock("alpha").Held(), m.LeaderTerm())
	}
	if kv := m.KV("orders"); !kv.Exists || string(kv.Value) != "v2" || kv.Token != 43 || kv.Version != 2 {
		t.Fatalf("kv orders after restore: %+v", kv)
	}
	lin := m.Lineage()
	if len(lin) != 1 || lin[0].GetIssuer() != "golden" || lin[0].GetNewIssuer() != issuer || lin[0].GetTokenFloor() != uint64(floor) || lin[0].GetLastToken() != uint64(old.LastToken()) {
		t.Fatalf("lineage %v", lin)
	}
	s := createSession(t, m)
	res := acquire(m, s, 1, "alpha", false)
	if res.Err != nil || res.Grant.Token <= floor {
		t.Fatalf("first grant %+v, want a token above the floor %d", res, floor)
	}
	// A restore of the restore is the next epoch, with both in its lineage.
	out2, issuer2, err := fsm.Restored(mustSnapshot(t, m), fsm.Reissue{Floor: res.Grant.Token})
	if err != nil || issuer2 != "golden.e3" {
		t.Fatalf("second restore: %q, %v", issuer2, err)
	}
	m2 := fsm.New(nil)
	if err := m2.Restore(out2); err != nil || len(m2.Lineage()) != 2 {
		t.Fatalf("second restore: %v, lineage %v", err, m2.Lineage())
	}
}

// A floor below the snapshot's last token or reservation, or above the
// maximum, is refused: the new cluster could issue a token the old one
// handed out.
func TestRestored_RefusesALowFloor(t *testing.T) {
	old := goldenState(t)
	old.Apply(&statev1.Command{Op: &statev1.Command_ReserveTokens{ReserveTokens: &statev1.ReserveTokens{Block: 100}}})
	snap := mustSnapshot(t, old)
	for _, floor := range []fence.Token{0, old.LastToken() - 1, old.LastToken(), old.ReservedToken() - 1, fence.MaxToken + 1} {
		if _, _, err := fsm.Restored(snap, fsm.Reissue{Floor: floor}); !errors.Is(err, fence.ErrInvalidArgument) {
			t.Errorf("floor %d (last %d, reserved %d): %v, want ErrInvalidArgument", floor, old.LastToken(), old.ReservedToken(), err)
		}
	}
	if _, _, err := fsm.Restored(snap, fsm.Reissue{Floor: old.ReservedToken()}); err != nil {
		t.Errorf("floor at the reservation: %v", err)
	}
	if _, _, err := fsm.Restored(snap[:len(snap)/2], fsm.Reissue{Floor: old.ReservedToken()}); err == nil {
		t.Error("a truncated snapshot restored")
	}
}
