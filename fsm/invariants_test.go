package fsm_test

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// validState is a state some sequence of commands reaches: two sessions,
// one holding "a" with token 7, the other waiting for it, a kv key.
func validState() *statev1.State {
	return &statev1.State{
		Issuer: "c1", LastToken: 9, LastSession: 2,
		Sessions: []*statev1.Session{{Id: 1, TtlMs: 1000}, {Id: 2, TtlMs: 1000}},
		Locks:    []*statev1.Lock{{Name: "a", Holder: 1, Token: 7, Waiters: []*statev1.Waiter{{Session: 2, Seq: 1}}}},
		Kv:       []*statev1.KVEntry{{Key: "k", Value: []byte("v"), Token: 8, Version: 1, Exists: true}},
		Nodes:    []*statev1.RegisterNode{{Id: "n1", ApiAddr: "127.0.0.1:7700"}},
	}
}

func restore(t *testing.T, st *statev1.State) error {
	t.Helper()
	b, err := proto.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	m := fsm.New(nil)
	err = m.Restore(b)
	if err != nil && (m.Issuer() != "" || m.SessionCount() != 0 || m.LastToken() != 0) {
		t.Fatalf("a refused Restore left state behind")
	}
	return err
}

// Restore refuses a snapshot that decodes but describes a state no
// sequence of commands reaches, naming what is wrong, and leaves the
// machine empty.
func TestRestore_RefusesBrokenInvariants(t *testing.T) {
	if err := restore(t, validState()); err != nil {
		t.Fatalf("valid state refused: %v", err)
	}
	for _, tt := range []struct {
		name   string
		change func(st *statev1.State)
		want   string
	}{
		{"holder token above the counter", func(st *statev1.State) { st.Locks[0].Token = 10 }, "token 10; want 1 to the last token 9"},
		{"holder without a token", func(st *statev1.State) { st.Locks[0].Token = 0 }, "token 0"},
		{"two locks with one token", func(st *statev1.State) {
			st.Sessions = append(st.Sessions, &statev1.Session{Id: 3, TtlMs: 1000})
			st.LastSession = 3
			st.Locks = append(st.Locks, &statev1.Lock{Name: "b", Holder: 3, Token: 7})
		}, "hold the same token 7"},
		{"a lock listed twice", func(st *statev1.State) { st.Locks = append(st.Locks, &statev1.Lock{Name: "a", Holder: 2, Token: 8}) }, "2 locks but only 1 distinct"},
		{"a session listed twice", func(st *statev1.State) { st.Sessions = append(st.Sessions, &statev1.Session{Id: 2, TtlMs: 1000}) }, "3 sessions but only 2 distinct"},
		{"a session above the session counter", func(st *statev1.State) { st.LastSession = 1 }, "above the last session id 1"},
		{"a session queued behind itself", func(st *statev1.State) {
			st.Locks[0].Waiters = append(st.Locks[0].Waiters, &statev1.Waiter{Session: 1})
		}, "waits for \"a\", which it holds"},
		{"a session queued twice", func(st *statev1.State) {
			st.Locks[0].Waiters = append(st.Locks[0].Waiters, &statev1.Waiter{Session: 2})
		}, "queued twice"},
		{"a ttl that overflows a duration", func(st *statev1.State) { st.Sessions[0].TtlMs = 1<<58 + 100 }, "got 288230376151711844ms"},
		{"an idle lock", func(st *statev1.State) { st.Locks = append(st.Locks, &statev1.Lock{Name: "idle"}) }, "free with no waiters"},
		{"a kv watermark above the counter", func(st *statev1.State) { st.Kv[0].Token = 10 }, "watermark 10"},
		{"a kv key listed twice", func(st *statev1.State) { st.Kv = append(st.Kv, st.Kv[0]) }, "kv entries"},
		{"replies out of order", func(st *statev1.State) {
			st.Sessions[0].Replies = []*statev1.Reply{{Seq: 3, Kind: 3, Name: "x"}, {Seq: 2, Kind: 3, Name: "x"}}
		}, "reply seq 2 is not above 3"},
		{"no issuer", func(st *statev1.State) { st.Issuer = "" }, "no issuer"},
		// Found by FuzzRestore: a restored counter without an issuer let kv
		// writes through before any Init.
		{"a token counter but no issuer", func(st *statev1.State) {
			*st = statev1.State{LastToken: 8}
		}, "no issuer"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := validState()
			tt.change(st)
			err := restore(t, st)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Restore: %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
}

// Names and registrations accepted before today's rules restore: a kv
// tombstone with a zero-width character lives in snapshots for good, and
// refusing it would keep an upgraded node from starting.
func TestRestore_AcceptsNamesOfEarlierRules(t *testing.T) {
	st := validState()
	st.Locks[0].Name = "a\u202e"
	st.Kv[0].Key = "k\u200b"
	st.Nodes[0].ApiAddr = "node-1" // no port: RegisterNode refuses it now
	if err := restore(t, st); err != nil {
		t.Fatalf("Restore of a state with names of earlier rules: %v", err)
	}
}

// A snapshot in which a lock and an election's leader hold one token is
// refused: no primitive's own check sees it, the live-grant index rebuilt
// at restore does (rebuildLive), as checkLive did before it was left out
// of the restore's checks.
func TestRestore_RefusesOneTokenInTwoPrimitives(t *testing.T) {
	m := fsm.New(nil)
	m.Apply(initCommand(0))
	s1 := m.Apply(&statev1.Command{Op: &statev1.Command_CreateSession{CreateSession: &statev1.CreateSession{TtlMs: 10000}}}).Session
	s2 := m.Apply(&statev1.Command{Op: &statev1.Command_CreateSession{CreateSession: &statev1.CreateSession{TtlMs: 10000}}}).Session
	lock := m.Apply(&statev1.Command{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Session: s1, Seq: 1, Name: "a"}}})
	if !lock.Granted {
		t.Fatal("not granted")
	}
	if !m.Apply(&statev1.Command{Op: &statev1.Command_Campaign{Campaign: &statev1.Campaign{Session: s2, Seq: 1, Name: "e"}}}).Granted {
		t.Fatal("not elected")
	}
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var st statev1.State
	if err := proto.Unmarshal(snap, &st); err != nil {
		t.Fatal(err)
	}
	if err := restore(t, &st); err != nil {
		t.Fatalf("the untouched snapshot: %v", err)
	}
	e := st.Elections[0]
	for _, h := range e.History {
		if h.Token == e.Token {
			h.Token = uint64(lock.Grant.Token)
		}
	}
	e.Token = uint64(lock.Grant.Token)
	want := fmt.Sprintf("two grants hold token %d", lock.Grant.Token)
	if err := restore(t, &st); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Restore: %v, want an error mentioning %q", err, want)
	}
}
