package fsm_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// reservationLog records, in order, the ends the reservation hook was told
// and the grants the observer saw.
type reservationLog struct {
	fsm.NopObserver
	events []string
}

func (r *reservationLog) Granted(g fence.Grant) {
	r.events = append(r.events, fmt.Sprintf("grant %d", g.Token))
}
func (r *reservationLog) reserved(end fence.Token) {
	r.events = append(r.events, fmt.Sprintf("reserve %d", end))
}

func reserveTokens(m *fsm.Machine, floor, block uint64) fsm.Result {
	return m.Apply(&statev1.Command{Op: &statev1.Command_ReserveTokens{ReserveTokens: &statev1.ReserveTokens{Floor: floor, Block: block}}})
}

// Every token is issued only after the end of a reservation that covers it
// was handed to the hook; grants in the block do not call it again.
func TestReservation_EndPersistedBeforeItsTokens(t *testing.T) {
	rec := &reservationLog{}
	m := fsm.New(rec)
	m.SetReservationHook(rec.reserved)
	m.Apply(initCommand(0))
	if res := reserveTokens(m, 0, 3); res.Err != nil {
		t.Fatalf("reserve: %v", res.Err)
	}
	s := createSession(t, m)
	for i := range 7 {
		if res := acquire(m, s, uint64(i+1), fmt.Sprintf("l%d", i), false); !res.Granted {
			t.Fatalf("acquire %d: %+v", i, res)
		}
	}
	want := []string{"reserve 3", "grant 1", "grant 2", "grant 3", "reserve 6", "grant 4", "grant 5", "grant 6", "reserve 9", "grant 7"}
	if !slices.Equal(rec.events, want) {
		t.Fatalf("events %v, want %v", rec.events, want)
	}
	if got := m.ReservedToken(); got != 9 {
		t.Fatalf("ReservedToken() = %d, want 9", got)
	}
}

// A waiter promoted by a release takes its token through the same
// reservation.
func TestReservation_PromotionExtendsIt(t *testing.T) {
	rec := &reservationLog{}
	m := fsm.New(rec)
	m.SetReservationHook(rec.reserved)
	m.Apply(initCommand(0))
	reserveTokens(m, 0, 1)
	a, b := createSession(t, m), createSession(t, m)
	acquire(m, a, 1, "x", false)
	acquire(m, b, 1, "x", true)
	release(m, a, 2, "x")
	want := []string{"reserve 1", "grant 1", "reserve 2", "grant 2"}
	if !slices.Equal(rec.events, want) {
		t.Fatalf("events %v, want %v", rec.events, want)
	}
}

// ReserveTokens restarts the counter above its floor and above the end of
// the reservation so far: tokens up to that end may have been handed out by
// entries a damaged log lost.
func TestReservation_RestartsAboveFloorAndReservation(t *testing.T) {
	m := newMachine(t)
	reserveTokens(m, 0, 100)
	s := createSession(t, m)
	acquire(m, s, 1, "a", false) // token 1
	if res := reserveTokens(m, 0, 100); res.Err != nil {
		t.Fatal(res.Err)
	}
	if m.LastToken() != 100 || m.ReservedToken() != 200 {
		t.Fatalf("after a second reserve: last %d reserved %d, want 100 and 200", m.LastToken(), m.ReservedToken())
	}
	reserveTokens(m, 5000, 10)
	if m.LastToken() != 5000 || m.ReservedToken() != 5010 {
		t.Fatalf("after a reserve with floor 5000: last %d reserved %d, want 5000 and 5010", m.LastToken(), m.ReservedToken())
	}
	if res := acquire(m, s, 2, "b", false); res.Grant.Token != 5001 {
		t.Fatalf("next token %d, want 5001", res.Grant.Token)
	}
}

// Without a ReserveTokens (a log written before reservations) tokens are
// issued as before and the hook is never called.
func TestReservation_OffUntilFirstReserve(t *testing.T) {
	calls := 0
	m := fsm.New(nil)
	m.SetReservationHook(func(fence.Token) { calls++ })
	m.Apply(initCommand(0))
	s := createSession(t, m)
	for i := range 5 {
		acquire(m, s, uint64(i+1), fmt.Sprintf("l%d", i), false)
	}
	if calls != 0 || m.ReservedToken() != 0 || m.LastToken() != 5 {
		t.Fatalf("calls %d reserved %d last %d, want 0, 0, 5", calls, m.ReservedToken(), m.LastToken())
	}
}

func TestReservation_BadInputChangesNothing(t *testing.T) {
	m := newMachine(t)
	reserveTokens(m, 0, 10)
	before := mustSnapshot(t, m)
	for _, r := range []struct{ floor, block uint64 }{{0, 0}, {0, 1<<20 + 1}, {uint64(fence.MaxToken) + 1, 10}} {
		if res := reserveTokens(m, r.floor, r.block); !errors.Is(res.Err, fence.ErrInvalidArgument) {
			t.Errorf("reserve floor %d block %d: %v, want ErrInvalidArgument", r.floor, r.block, res.Err)
		}
	}
	if after := mustSnapshot(t, m); string(after) != string(before) {
		t.Fatal("a refused ReserveTokens changed the state")
	}
}

// The reservation is part of the snapshot; a restored machine extends it
// through its own hook.
func TestReservation_Snapshot(t *testing.T) {
	m := newMachine(t)
	reserveTokens(m, 0, 2)
	s := createSession(t, m)
	acquire(m, s, 1, "a", false)
	acquire(m, s, 2, "b", false)
	var ends []fence.Token
	r := fsm.New(nil)
	r.SetReservationHook(func(end fence.Token) { ends = append(ends, end) })
	if err := r.Restore(mustSnapshot(t, m)); err != nil {
		t.Fatal(err)
	}
	if r.ReservedToken() != 2 || r.LastToken() != 2 {
		t.Fatalf("restored reserved %d last %d, want 2 and 2", r.ReservedToken(), r.LastToken())
	}
	if res := acquire(r, s, 3, "c", false); res.Grant.Token != 3 || !slices.Equal(ends, []fence.Token{4}) {
		t.Fatalf("after restore: token %d, hook told %v; want token 3 after the end 4", res.Grant.Token, ends)
	}
}
