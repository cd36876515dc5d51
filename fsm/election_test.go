package fsm_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

func campaign(m *fsm.Machine, session, seq uint64, name, value string) fsm.Result {
	return m.Apply(&statev1.Command{Op: &statev1.Command_Campaign{Campaign: &statev1.Campaign{Session: session, Seq: seq, Name: name, Value: []byte(value)}}})
}

func resign(m *fsm.Machine, session, seq uint64, name string) fsm.Result {
	return m.Apply(&statev1.Command{Op: &statev1.Command_Resign{Resign: &statev1.Resign{Session: session, Seq: seq, Name: name}}})
}

func proclaim(m *fsm.Machine, session, seq uint64, name, value string, token fence.Token) fsm.Result {
	return m.Apply(&statev1.Command{Op: &statev1.Command_Proclaim{Proclaim: &statev1.Proclaim{Session: session, Seq: seq, Name: name, Value: []byte(value), Token: uint64(token)}}})
}

// Candidates lead in arrival order, each with a term token above the
// last; losing the leader by resign, close or expiry promotes the next.
func TestElection_CandidatesLeadInOrderWithRisingTerms(t *testing.T) {
	m := newMachine(t)
	a, b, c, d := createSession(t, m), createSession(t, m), createSession(t, m), createSession(t, m)
	first := campaign(m, a, 1, "e", "va")
	if !first.Granted || first.Grant.Name != "e" {
		t.Fatalf("first campaign=%+v, want it to lead", first)
	}
	for _, s := range []uint64{b, c, d} {
		if res := campaign(m, s, 1, "e", fmt.Sprint("v", s)); !res.Queued || res.Holder != a {
			t.Fatalf("campaign of %d=%+v, want queued behind %d", s, res, a)
		}
	}
	if info := m.Election("e"); info.Leader.Session != a || string(info.Value) != "va" || fmt.Sprint(info.Candidates) != fmt.Sprint([]uint64{b, c, d}) {
		t.Fatalf("Election=%+v, want a leading with b, c, d queued", info)
	}
	terms := []fence.Token{first.Grant.Token}
	next := func(how string, end func(), want uint64, value string) {
		t.Helper()
		end()
		info := m.Election("e")
		if info.Leader.Session != want || string(info.Value) != value {
			t.Fatalf("after %s: leader %d value %q, want %d %q", how, info.Leader.Session, info.Value, want, value)
		}
		if prev := terms[len(terms)-1]; info.Leader.Token <= prev {
			t.Fatalf("after %s: term token %d, not above %d", how, info.Leader.Token, prev)
		}
		terms = append(terms, info.Leader.Token)
	}
	next("resign", func() { resign(m, a, 2, "e") }, b, fmt.Sprint("v", b))
	next("close", func() {
		m.Apply(&statev1.Command{Op: &statev1.Command_CloseSession{CloseSession: &statev1.CloseSession{Session: b}}})
	}, c, fmt.Sprint("v", c))
	next("expiry", func() { expire(m, c, 0) }, d, fmt.Sprint("v", d))
	if res := resign(m, d, 2, "e"); res.Release != fsm.Released {
		t.Fatalf("last resign=%+v", res)
	}
	if info := m.Election("e"); info.HasLeader() || len(info.Candidates) != 0 {
		t.Fatalf("after the last resign: %+v, want no leader", info)
	}
}

// Proclaim changes the leader's value under the same token; a session
// that does not lead, a stale token or a wrong secret is refused and
// changes nothing.
func TestElection_ProclaimKeepsTokenAndIsOwnerChecked(t *testing.T) {
	m := newMachine(t)
	a := createOwned(t, m, "", ownerHash)
	b := createSession(t, m)
	won := m.Apply(&statev1.Command{Op: &statev1.Command_Campaign{Campaign: &statev1.Campaign{Session: a, Seq: 1, Name: "e", Value: []byte("v1"), SecretHash: ownerHash}}})
	campaign(m, b, 1, "e", "vb")
	res := m.Apply(&statev1.Command{Op: &statev1.Command_Proclaim{Proclaim: &statev1.Proclaim{Session: a, Seq: 2, Name: "e", Value: []byte("v2"), Token: uint64(won.Grant.Token), SecretHash: ownerHash}}})
	if res.Err != nil || res.Grant.Token != won.Grant.Token {
		t.Fatalf("proclaim=%+v, want the term token %d", res, won.Grant.Token)
	}
	if info := m.Election("e"); string(info.Value) != "v2" || info.Leader.Token != won.Grant.Token {
		t.Fatalf("Election=%+v, want value v2 under token %d", info, won.Grant.Token)
	}
	before := mustSnapshot(t, m)
	for _, tt := range []struct {
		name string
		cmd  *statev1.Proclaim
		want error
	}{
		{"not the leader", &statev1.Proclaim{Session: b, Seq: 2, Name: "e", Value: []byte("x")}, fence.ErrNotGranted},
		{"another token", &statev1.Proclaim{Session: a, Seq: 3, Name: "e", Value: []byte("x"), Token: uint64(won.Grant.Token) + 100, SecretHash: ownerHash}, fence.ErrNotGranted},
		{"wrong secret", &statev1.Proclaim{Session: a, Seq: 3, Name: "e", Value: []byte("x"), SecretHash: attackerHash}, fence.ErrNotOwner},
		{"no secret", &statev1.Proclaim{Session: a, Seq: 3, Name: "e", Value: []byte("x")}, fence.ErrNotOwner},
	} {
		if res := m.Apply(&statev1.Command{Op: &statev1.Command_Proclaim{Proclaim: tt.cmd}}); !errors.Is(res.Err, tt.want) {
			t.Errorf("%s: %+v, want %v", tt.name, res, tt.want)
		}
	}
	resignAttack := m.Apply(&statev1.Command{Op: &statev1.Command_Resign{Resign: &statev1.Resign{Session: a, Seq: 3, Name: "e", SecretHash: attackerHash}}})
	if !errors.Is(resignAttack.Err, fence.ErrNotOwner) {
		t.Errorf("resign with the wrong secret: %+v, want ErrNotOwner", resignAttack)
	}
	if !bytes.Equal(mustSnapshot(t, m), before) {
		t.Fatal("a refused proclaim or resign changed the state")
	}
}

// An observer resuming from any revision still in the history gets every
// change after it, each naming the one before; from one that fell out of
// the bounded history it is told it skipped and gets the current state.
func TestElection_HistoryResumesOrSkips(t *testing.T) {
	m := newMachine(t)
	a := createSession(t, m)
	campaign(m, a, 1, "e", "v0")
	start := m.Election("e").Revision
	for i := 1; i <= fsm.ElectionHistory+10; i++ {
		if res := proclaim(m, a, uint64(i+1), "e", fmt.Sprint("v", i), 0); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	now := m.Election("e").Revision
	if now != start+fsm.ElectionHistory+10 {
		t.Fatalf("revision %d after %d proclaims from %d", now, fsm.ElectionHistory+10, start)
	}
	from := now - 5
	got, skipped, err := m.ElectionChanges("e", from)
	if err != nil || skipped || len(got) != 5 {
		t.Fatalf("ElectionChanges(%d)=%v skipped=%v err=%v, want the 5 changes after it", from, got, skipped, err)
	}
	prev := from
	for _, c := range got {
		if c.PrevRevision != prev || c.Leader.Session != a {
			t.Fatalf("change %d names %d as its previous, want %d", c.Revision, c.PrevRevision, prev)
		}
		prev = c.Revision
	}
	if last := got[len(got)-1]; string(last.Value) != fmt.Sprint("v", fsm.ElectionHistory+10) {
		t.Fatalf("newest change has value %q", last.Value)
	}
	got, skipped, err = m.ElectionChanges("e", start)
	if err != nil || !skipped || len(got) != 1 || got[0].Revision != now {
		t.Fatalf("ElectionChanges(%d)=%v skipped=%v err=%v, want skipped and the current state at %d", start, got, skipped, err, now)
	}
	if got, skipped, _ := m.ElectionChanges("e", now); skipped || len(got) != 0 {
		t.Fatalf("an observer that is up to date got %v skipped=%v", got, skipped)
	}
	if _, _, err := m.ElectionChanges("e", now+1); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Fatalf("a revision from the future: %v, want ErrInvalidArgument", err)
	}
	// The election ends; it is kept, idle, with its newest changes: an
	// observer that saw the change before the end gets the end, one from
	// before the idle election's shorter history is told it skipped.
	resign(m, a, 200, "e")
	end := m.ElectionRevision()
	if got, skipped, _ := m.ElectionChanges("e", end); skipped || len(got) != 0 {
		t.Fatalf("after the end, from the end: %v skipped=%v, want nothing", got, skipped)
	}
	if got, skipped, _ := m.ElectionChanges("e", now); skipped || len(got) != 1 || got[0].Leader.Token != 0 || got[0].PrevRevision != now {
		t.Fatalf("after the end, from the change before it: %v skipped=%v, want the end", got, skipped)
	}
	if got, skipped, _ := m.ElectionChanges("e", end-fsm.IdleElectionHistory-1); !skipped || len(got) != 1 || got[0].Leader.Token != 0 {
		t.Fatalf("after the end, from before the idle history: %v skipped=%v, want skipped and no leader", got, skipped)
	}
	// Past MaxIdleElections idle elections, the one idle for longest is
	// forgotten: resuming in it from before its end is told skipped, from
	// its end or later gets nothing.
	for i := 0; i < fsm.MaxIdleElections; i++ {
		name := fmt.Sprint("idle-", i)
		campaign(m, a, uint64(300+2*i), name, "")
		resign(m, a, uint64(301+2*i), name)
	}
	if got, skipped, _ := m.ElectionChanges("e", now); !skipped || len(got) != 1 || got[0].Leader.Token != 0 {
		t.Fatalf("a forgotten election, from before its end: %v skipped=%v, want skipped and no leader", got, skipped)
	}
	if got, skipped, _ := m.ElectionChanges("e", m.ElectionRevision()); skipped || len(got) != 0 {
		t.Fatalf("a forgotten election, from now: %v skipped=%v, want nothing", got, skipped)
	}
}

// A resign that withdraws a campaign (its caller gave up) undoes it
// whether it arrives before or after the campaign.
func TestElection_WithdrawCampaign(t *testing.T) {
	m := newMachine(t)
	a, b := createSession(t, m), createSession(t, m)
	campaign(m, a, 1, "e", "")
	withdraw := func(s, seq, w uint64) fsm.Result {
		return m.Apply(&statev1.Command{Op: &statev1.Command_Resign{Resign: &statev1.Resign{Session: s, Seq: seq, Name: "e", WithdrawSeq: w}}})
	}
	// Before: the campaign, arriving late, is refused.
	withdraw(b, 2, 1)
	if res := campaign(m, b, 1, "e", ""); !errors.Is(res.Err, fence.ErrInvalidArgument) {
		t.Fatalf("withdrawn campaign arriving late: %+v, want refused", res)
	}
	// After, queued: it leaves the candidates.
	campaign(m, b, 3, "e", "")
	if res := withdraw(b, 4, 3); res.Release != fsm.Released || len(m.Election("e").Candidates) != 0 {
		t.Fatalf("withdraw of a queued campaign: %+v, candidates %v", res, m.Election("e").Candidates)
	}
	// After, leading: it resigns, and only that term.
	if res := withdraw(a, 2, 1); res.Release != fsm.Released || m.Election("e").HasLeader() {
		t.Fatalf("withdraw of a winning campaign: %+v, election %+v", res, m.Election("e"))
	}
}

// Bad input to every election command is refused with a clear error and
// changes nothing.
func TestElection_BadInputChangesNothing(t *testing.T) {
	m := newMachine(t)
	s := createSession(t, m)
	campaign(m, s, 1, "e", "v")
	before := mustSnapshot(t, m)
	big := strings.Repeat("x", fsm.MaxElectionValueBytes+1)
	for _, tt := range []struct {
		name string
		cmd  *statev1.Command
		want error
		msg  string
	}{
		{"empty name", &statev1.Command{Op: &statev1.Command_Campaign{Campaign: &statev1.Campaign{Session: s, Seq: 2}}}, fence.ErrInvalidArgument, "empty"},
		{"long name", &statev1.Command{Op: &statev1.Command_Campaign{Campaign: &statev1.Campaign{Session: s, Seq: 2, Name: strings.Repeat("n", 513)}}}, fence.ErrInvalidArgument, "longer than 512"},
		{"control char", &statev1.Command{Op: &statev1.Command_Resign{Resign: &statev1.Resign{Session: s, Seq: 2, Name: "a\x00b"}}}, fence.ErrInvalidArgument, "control"},
		{"invalid utf8", &statev1.Command{Op: &statev1.Command_Proclaim{Proclaim: &statev1.Proclaim{Session: s, Seq: 2, Name: "\xff"}}}, fence.ErrInvalidArgument, "UTF-8"},
		{"value too large", &statev1.Command{Op: &statev1.Command_Campaign{Campaign: &statev1.Campaign{Session: s, Seq: 2, Name: "f", Value: []byte(big)}}}, fence.ErrInvalidArgument, "larger than"},
		{"proclaim too large", &statev1.Command{Op: &statev1.Command_Proclaim{Proclaim: &statev1.Proclaim{Session: s, Seq: 2, Name: "e", Value: []byte(big)}}}, fence.ErrInvalidArgument, "larger than"},
		{"no session", &statev1.Command{Op: &statev1.Command_Campaign{Campaign: &statev1.Campaign{Name: "f"}}}, fence.ErrInvalidArgument, "needs a session"},
		{"unknown session", &statev1.Command{Op: &statev1.Command_Campaign{Campaign: &statev1.Campaign{Session: 99, Seq: 1, Name: "f"}}}, fence.ErrSessionNotFound, "does not exist"},
		{"seq reused for another name", &statev1.Command{Op: &statev1.Command_Campaign{Campaign: &statev1.Campaign{Session: s, Seq: 1, Name: "f"}}}, fence.ErrInvalidArgument, "already used"},
		{"withdraw itself", &statev1.Command{Op: &statev1.Command_Resign{Resign: &statev1.Resign{Session: s, Seq: 5, Name: "e", WithdrawSeq: 5}}}, fence.ErrInvalidArgument, "own seq"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := m.Apply(tt.cmd)
			if !errors.Is(res.Err, tt.want) || !strings.Contains(res.Err.Error(), tt.msg) {
				t.Fatalf("Err=%v, want %v mentioning %q", res.Err, tt.want, tt.msg)
			}
			if !bytes.Equal(mustSnapshot(t, m), before) {
				t.Fatal("a refused command changed the state")
			}
		})
	}
}

// electionGolden is a snapshot with elections in it, written when they
// were added; every later version must restore it unchanged.
var electionGolden = filepath.Join("testdata", "snapshot-election-v1.bin")

// An election's state (leader, value, candidates with values, history)
// survives a snapshot written by the version that added elections.
func TestElection_SnapshotFormat(t *testing.T) {
	m := newMachine(t)
	a, b, c := createSession(t, m), createSession(t, m), createSession(t, m)
	campaign(m, a, 1, "e", "va")
	campaign(m, b, 1, "e", "vb")
	campaign(m, c, 1, "e", "vc")
	proclaim(m, a, 2, "e", "va2", 0)
	campaign(m, c, 2, "gone", "")
	resign(m, c, 3, "gone")
	data := mustSnapshot(t, m)
	if *update {
		if err := os.WriteFile(electionGolden, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden, err := os.ReadFile(electionGolden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, versioned(golden)) {
		t.Errorf("the same commands now snapshot to other bytes than %s", electionGolden)
	}
	r := fsm.New(nil)
	if err := r.Restore(golden); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	info := r.Election("e")
	if info.Leader.Session != a || string(info.Value) != "va2" || fmt.Sprint(info.Candidates) != fmt.Sprint([]uint64{b, c}) {
		t.Fatalf("restored Election=%+v", info)
	}
	// The restored candidates keep their values and order.
	resign(r, a, 3, "e")
	if info := r.Election("e"); info.Leader.Session != b || string(info.Value) != "vb" {
		t.Fatalf("after restore and resign: %+v, want b leading with vb", info)
	}
	if got, skipped, _ := r.ElectionChanges("e", 1); skipped || len(got) == 0 || got[0].PrevRevision != 1 {
		t.Fatalf("restored history from 1: %v skipped=%v", got, skipped)
	}
}

// An administrator's revoke of a lock the leader's session holds ends the
// session, and with it the leadership: the next candidate leads with a
// higher token.
func TestElection_RevokedLeaderReplaced(t *testing.T) {
	m := newMachine(t)
	a, b := createSession(t, m), createSession(t, m)
	won := campaign(m, a, 1, "e", "")
	acquire(m, a, 2, "lock", false)
	campaign(m, b, 1, "e", "")
	if res := m.Apply(&statev1.Command{Op: &statev1.Command_Revoke{Revoke: &statev1.Revoke{Name: "lock"}}}); !res.Ended {
		t.Fatalf("revoke=%+v", res)
	}
	if info := m.Election("e"); info.Leader.Session != b || info.Leader.Token <= won.Grant.Token {
		t.Fatalf("after the revoke: %+v, want session %d leading above token %d", info, b, won.Grant.Token)
	}
}

// An election without a leader is not "led by session 0": a cancelled wait
// of session 0, or of a session that does not exist, on an election that
// lost its leader (its history kept) wins nothing and changes nothing.
func TestElection_CancelledWaitOfNobodyWinsNothing(t *testing.T) {
	m := newMachine(t)
	a := createSession(t, m)
	campaign(m, a, 1, "e", "v")
	resign(m, a, 2, "e")
	if m.Election("e").HasLeader() {
		t.Fatalf("after resign: %+v, want no leader", m.Election("e"))
	}
	before := mustSnapshot(t, m)
	for _, sid := range []uint64{0, a + 100} {
		res := m.Apply(&statev1.Command{Op: &statev1.Command_Resign{Resign: &statev1.Resign{Session: sid, Name: "e", CancelWait: true}}})
		if res.Granted || res.Grant.Token != 0 {
			t.Fatalf("cancelled wait of session %d on a leaderless election: %+v, want nothing granted", sid, res)
		}
		if !bytes.Equal(mustSnapshot(t, m), before) {
			t.Fatalf("cancelled wait of session %d changed the state", sid)
		}
	}
}
