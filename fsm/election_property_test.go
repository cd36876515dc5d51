package fsm

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	fence "github.com/fenced-dev/fenced"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// electionChecker is an Observer that checks the election rules on every
// event: one leader per name; term tokens strictly increasing over all
// leaders; candidates promoted in arrival order; and every election's
// changes pushed with revisions that only grow, each linked to the
// previous change of its name (no gap). It keeps every change, so the
// test can compare what a resuming observer is given with what happened.
type electionChecker struct {
	NopObserver
	t       *rapid.T
	leader  map[string]uint64
	last    fence.Token
	queue   map[string][]uint64 // expected promotion order, per name
	rev     uint64              // newest revision pushed
	lastRev map[string]uint64   // newest revision of each live election
	log     map[string][]ElectionChange
}

func newElectionChecker(t *rapid.T) *electionChecker {
	return &electionChecker{t: t, leader: map[string]uint64{}, queue: map[string][]uint64{}, lastRev: map[string]uint64{}, log: map[string][]ElectionChange{}}
}

func (c *electionChecker) Granted(g fence.Grant) {
	if h, ok := c.leader[g.Name]; ok {
		c.t.Fatalf("election %q: session %d elected while session %d leads", g.Name, g.Session, h)
	}
	if g.Kind != fence.KindLeader || g.Scope != g.Name {
		c.t.Fatalf("election %q: grant of kind %q, scope %q; want leader, the name", g.Name, g.Kind, g.Scope)
	}
	if g.Token <= c.last {
		c.t.Fatalf("election %q: term token %d is not above the previous token %d", g.Name, g.Token, c.last)
	}
	if q := c.queue[g.Name]; len(q) > 0 {
		if q[0] != g.Session {
			c.t.Fatalf("election %q: session %d elected, but session %d campaigned first (candidates %v)", g.Name, g.Session, q[0], q)
		}
		c.queue[g.Name] = q[1:]
	}
	c.last = g.Token
	c.leader[g.Name] = g.Session
}

func (c *electionChecker) Released(_ fence.Kind, name string, session uint64, _ fence.Token, _ int64, _ EndReason) {
	if c.leader[name] != session {
		c.t.Fatalf("election %q: session %d lost a leadership it did not have (leader %d)", name, session, c.leader[name])
	}
	delete(c.leader, name)
}

func (c *electionChecker) WaitEnded(_ fence.Kind, name string, session uint64) {
	q := c.queue[name]
	i := slices.Index(q, session)
	if i < 0 {
		c.t.Fatalf("election %q: session %d left candidates it was not among", name, session)
	}
	c.queue[name] = slices.Delete(q, i, i+1)
}

func (c *electionChecker) ElectionChanged(ch ElectionChange) {
	if ch.Revision <= c.rev {
		c.t.Fatalf("election %q: revision %d after revision %d", ch.Name, ch.Revision, c.rev)
	}
	if ch.PrevRevision != c.lastRev[ch.Name] {
		c.t.Fatalf("election %q: change %d names %d as its previous change, the previous was %d", ch.Name, ch.Revision, ch.PrevRevision, c.lastRev[ch.Name])
	}
	if ch.Leader.Session != c.leader[ch.Name] || (ch.Leader.Token == 0) != (c.leader[ch.Name] == 0) {
		c.t.Fatalf("election %q: change %d says leader %d, the grants say %d", ch.Name, ch.Revision, ch.Leader.Session, c.leader[ch.Name])
	}
	c.rev = ch.Revision
	c.lastRev[ch.Name] = ch.Revision // an idle election is kept: no restart
	c.log[ch.Name] = append(c.log[ch.Name], ch)
}

func (c *electionChecker) candidate(name string, session uint64) {
	if !slices.Contains(c.queue[name], session) {
		c.queue[name] = append(c.queue[name], session)
	}
}

var electionNames = []string{"x", "y"}

// drawElectionCommand draws a command over a few sessions and two
// elections: sessions come and go (closed, expired in any term), leaders
// change terms, tokens are reserved, and campaigns, resigns (some
// withdrawing an earlier or a future campaign, some the server's cancel of
// a wait) and proclaims (some naming a wrong token) use fresh and retried
// seqs.
func drawElectionCommand(t *rapid.T, seqs map[uint64]uint64, lastSession uint64, m *Machine) (_ *statev1.Command, fresh bool) {
	now := rapid.Int64Range(1, 1<<40).Draw(t, "now")
	// Mostly one of the newest sessions, which are the likeliest alive,
	// or the leader.
	session := rapid.Uint64Range(max(lastSession, 4)-3, lastSession+1).Draw(t, "session")
	name := rapid.SampledFrom(electionNames).Draw(t, "name")
	if l := m.Election(name).Leader.Session; l != 0 && rapid.Bool().Draw(t, "byleader") {
		session = l
	}
	seq := seqs[session] + 1
	if rapid.IntRange(0, 4).Draw(t, "retry") == 0 && seqs[session] > 0 {
		seq = rapid.Uint64Range(1, seqs[session]).Draw(t, "oldseq")
	} else {
		seqs[session], fresh = seq, true
	}
	value := []byte(rapid.SampledFrom([]string{"", "a", "b", "c"}).Draw(t, "value"))
	c := &statev1.Command{NowUnixMs: now}
	switch rapid.IntRange(0, 17).Draw(t, "op") {
	case 0, 1:
		// Some sessions are charged to an owner, whose campaigns may be
		// refused at its quota.
		c.Op = &statev1.Command_CreateSession{CreateSession: &statev1.CreateSession{TtlMs: 1000, Quota: &statev1.Quota{Owner: rapid.SampledFrom([]string{"", "o"}).Draw(t, "owner")}}}
	case 2:
		c.Op = &statev1.Command_CloseSession{CloseSession: &statev1.CloseSession{Session: session}}
	case 3:
		c.Op = &statev1.Command_ExpireSession{ExpireSession: &statev1.ExpireSession{Session: session, Term: rapid.Uint64Range(0, 3).Draw(t, "term")}}
	case 4:
		if rapid.IntRange(0, 2).Draw(t, "reserve") == 0 {
			c.Op = &statev1.Command_ReserveTokens{ReserveTokens: &statev1.ReserveTokens{Floor: rapid.Uint64Range(0, 1100).Draw(t, "reservefloor"), Block: rapid.Uint64Range(1, 4).Draw(t, "block")}}
		} else {
			c.Op = &statev1.Command_NewLeader{NewLeader: &statev1.NewLeader{Term: rapid.Uint64Range(0, 3).Draw(t, "term")}}
		}
	case 5, 6, 7, 8:
		q := &statev1.Quota{MaxHeld: rapid.Uint32Range(0, 2).Draw(t, "maxheld"), MaxWaiting: rapid.Uint32Range(0, 2).Draw(t, "maxwaiting")}
		c.Op = &statev1.Command_Campaign{Campaign: &statev1.Campaign{Session: session, Seq: seq, Name: name, Value: value, Quota: q}}
	case 9, 10, 11:
		r := &statev1.Resign{Session: session, Seq: seq, Name: name}
		switch rapid.IntRange(0, 3).Draw(t, "withdraw") {
		case 0:
			r.WithdrawSeq = rapid.Uint64Range(1, seqs[session]+2).Draw(t, "withdrawseq")
		case 1:
			r.CancelWait = true
		}
		c.Op = &statev1.Command_Resign{Resign: r}
	default:
		p := &statev1.Proclaim{Session: session, Seq: seq, Name: name, Value: value}
		switch rapid.IntRange(0, 2).Draw(t, "proclaimtoken") {
		case 0:
			p.Token = uint64(m.Election(name).Leader.Token)
		case 1:
			p.Token = rapid.Uint64Range(1, 50).Draw(t, "token")
		}
		c.Op = &statev1.Command_Proclaim{Proclaim: p}
	}
	return c, fresh
}

// TestElection_Properties applies random command sequences and checks, on
// every step, the electionChecker's rules and every invariant of the
// state; that a retried campaign that won returns its term token without
// issuing one and a proclaim keeps the token; that what a resuming
// observer is given from any revision is exactly the changes it missed
// (or the current state, told skipped, when they are no longer kept);
// and that snapshot -> restore -> replay of the rest gives the same state
// as applying everything.
func TestElection_Properties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := newElectionChecker(t)
		m := New(c)
		// Sometimes near the end of the tokens: leaders run out of terms
		// and candidates wait without a leader.
		floor := rapid.SampledFrom([]uint64{0, 7, 1000, uint64(fence.MaxToken) - 6}).Draw(t, "floor")
		m.Apply(&statev1.Command{Op: &statev1.Command_Init{Init: &statev1.Init{Issuer: "test-issuer", TokenFloor: floor}}})
		n := rapid.IntRange(100, 400).Draw(t, "n")
		cut := rapid.IntRange(0, n).Draw(t, "cut")
		seqs := map[uint64]uint64{}
		won := map[[2]uint64]fence.Token{} // (session, seq) -> term token
		var rest []*statev1.Command
		var snap []byte
		var lastSession uint64
		for i := 0; i < n; i++ {
			if i == cut {
				snap = mustSnapshot(t, m)
			}
			cmd, fresh := drawElectionCommand(t, seqs, lastSession, m)
			if i >= cut {
				rest = append(rest, cmd)
			}
			before := m.LastToken()
			var lead fence.Token
			if p := cmd.GetProclaim(); p != nil {
				lead = m.Election(p.GetName()).Leader.Token
			}
			res := m.Apply(cmd)
			if res.Session > lastSession {
				lastSession = res.Session
			}
			if err := m.checkInvariants(); err != nil {
				t.Fatalf("after %v: %v", cmd, err)
			}
			if a := cmd.GetCampaign(); a != nil && res.Err == nil {
				key := [2]uint64{a.GetSession(), a.GetSeq()}
				if tok, ok := won[key]; ok && (!res.Granted || res.Grant.Token != tok || m.LastToken() != before) {
					t.Fatalf("retry of winning campaign %v returned %+v (last token %d, was %d), want token %d and none issued", key, res, m.LastToken(), before, tok)
				}
				if res.Granted {
					won[key] = res.Grant.Token
				}
				if res.Queued {
					c.candidate(a.GetName(), res.Session)
				}
			}
			if p := cmd.GetProclaim(); p != nil && res.Err == nil && fresh {
				if res.Grant.Token != lead || m.LastToken() != before {
					t.Fatalf("proclaim returned token %d, the leader's was %d (last token %d, was %d)", res.Grant.Token, lead, m.LastToken(), before)
				}
				if info := m.Election(p.GetName()); !bytes.Equal(info.Value, p.GetValue()) {
					t.Fatalf("after a fresh proclaim of %q the value is %q", p.GetValue(), info.Value)
				}
			}
			checkResume(t, m, c)
		}
		if snap == nil {
			snap = mustSnapshot(t, m)
		}
		replayed := New(nil)
		if err := replayed.Restore(snap); err != nil {
			t.Fatalf("Restore: %v", err)
		}
		for _, cmd := range rest {
			replayed.Apply(cmd)
		}
		if got, want := mustSnapshot(t, replayed), mustSnapshot(t, m); !bytes.Equal(got, want) {
			t.Fatalf("snapshot at %d, restore and replay of %d commands gave a different state", cut, len(rest))
		}
		for _, name := range electionNames {
			if info := m.Election(name); info.Leader.Session != c.leader[name] {
				t.Fatalf("Election(%q).Leader.Session=%d, want %d", name, info.Leader.Session, c.leader[name])
			}
		}
	})
}

// checkResume asks, for a random election and revision, what a resuming
// observer gets, and compares it with the changes the checker saw.
func checkResume(t *rapid.T, m *Machine, c *electionChecker) {
	name := rapid.SampledFrom(electionNames).Draw(t, "observe")
	after := rapid.Uint64Range(0, m.ElectionRevision()).Draw(t, "after")
	got, skipped, err := m.ElectionChanges(name, after)
	if err != nil {
		t.Fatalf("ElectionChanges(%q, %d): %v", name, after, err)
	}
	var missed []ElectionChange
	for _, ch := range c.log[name] {
		if ch.Revision > after {
			missed = append(missed, ch)
		}
	}
	info := m.Election(name)
	if after == 0 || skipped {
		if len(got) != 1 || got[0].Leader.Token != info.Leader.Token || !bytes.Equal(got[0].Value, info.Value) || got[0].Revision != info.Revision {
			t.Fatalf("ElectionChanges(%q, %d)=%v (skipped %v), want the current state %+v", name, after, got, skipped, info)
		}
		return
	}
	if changesKey(got) != changesKey(missed) {
		t.Fatalf("ElectionChanges(%q, %d)=%v, want the changes after it %v", name, after, got, missed)
	}
}

// changesKey describes changes by what an observer compares: revisions,
// leader, term token and value.
func changesKey(cs []ElectionChange) string {
	var b bytes.Buffer
	for _, c := range cs {
		fmt.Fprintf(&b, "%s@%d<-%d:%d/%d=%q ", c.Name, c.Revision, c.PrevRevision, c.Leader.Session, c.Leader.Token, c.Value)
	}
	return b.String()
}

func mustSnapshot(t interface{ Fatalf(string, ...any) }, m *Machine) []byte {
	b, err := m.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	return b
}

// When the tokens run out, the last candidate of an election without a
// leader may leave it after another election went idle: the idle list
// stays in the order of the newest revisions, the order a restore
// rebuilds, so every replica forgets the same election first.
func TestElection_IdleOrderWhenTokensRunOut(t *testing.T) {
	m := New(nil)
	m.Apply(&statev1.Command{Op: &statev1.Command_Init{Init: &statev1.Init{Issuer: "i", TokenFloor: uint64(fence.MaxToken) - 2}}})
	var s [4]uint64
	for i := 1; i < 4; i++ {
		s[i] = m.Apply(&statev1.Command{Op: &statev1.Command_CreateSession{CreateSession: &statev1.CreateSession{TtlMs: 1000}}}).Session
	}
	for _, c := range []*statev1.Command{
		{Op: &statev1.Command_Campaign{Campaign: &statev1.Campaign{Session: s[1], Seq: 1, Name: "y"}}}, // the next to last token
		{Op: &statev1.Command_Campaign{Campaign: &statev1.Campaign{Session: s[2], Seq: 1, Name: "y"}}}, // a candidate
		{Op: &statev1.Command_Campaign{Campaign: &statev1.Campaign{Session: s[3], Seq: 1, Name: "z"}}}, // the last token
		{Op: &statev1.Command_Resign{Resign: &statev1.Resign{Session: s[1], Seq: 2, Name: "y"}}},       // no token for the candidate
		{Op: &statev1.Command_Resign{Resign: &statev1.Resign{Session: s[3], Seq: 2, Name: "z"}}},       // z idle
		{Op: &statev1.Command_Resign{Resign: &statev1.Resign{Session: s[2], Seq: 2, Name: "y"}}},       // y idle, older
	} {
		if res := m.Apply(c); res.Err != nil {
			t.Fatalf("%v: %v", c, res.Err)
		}
		if err := m.checkInvariants(); err != nil {
			t.Fatalf("after %v: %v", c, err)
		}
	}
	if got := fmt.Sprint(m.elections.idle); got != "[y z]" {
		t.Fatalf("idle elections %s, want [y z] (y's newest change is older)", got)
	}
}
