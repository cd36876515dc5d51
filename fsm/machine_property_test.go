package fsm_test

import (
	"bytes"
	"fmt"
	"testing"

	"pgregory.net/rapid"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// checker is an Observer that checks the safety properties on every event:
// at most one holder per lock, tokens strictly increasing over all grants,
// no token above the token reservation recorded before it (once one was),
// and queued waiters granted in arrival order.
type checker struct {
	fsm.NopObserver
	t        *rapid.T
	holder   map[string]uint64
	last     fence.Token
	recorded fence.Token         // the highest end the reservation hook was told
	queue    map[string][]uint64 // expected grant order of waiters, per name
	granted  []fence.Grant
}

func newChecker(t *rapid.T) *checker {
	return &checker{t: t, holder: map[string]uint64{}, queue: map[string][]uint64{}}
}

func (c *checker) Granted(g fence.Grant) {
	if h, ok := c.holder[g.Name]; ok {
		c.t.Fatalf("grant of %q to session %d while session %d holds it", g.Name, g.Session, h)
	}
	if g.Token <= c.last {
		c.t.Fatalf("token %d for %q is not above the previous token %d", g.Token, g.Name, c.last)
	}
	if c.recorded > 0 && g.Token > c.recorded {
		c.t.Fatalf("token %d for %q is above the recorded reservation %d", g.Token, g.Name, c.recorded)
	}
	c.last = g.Token
	c.holder[g.Name] = g.Session
	if q := c.queue[g.Name]; len(q) > 0 {
		// A grant while sessions wait must go to the one that queued first.
		if q[0] != g.Session {
			c.t.Fatalf("%q granted to session %d, but session %d queued first (queue %v)", g.Name, g.Session, q[0], q)
		}
		c.queue[g.Name] = q[1:]
	}
	c.granted = append(c.granted, g)
}

// record is the reservation hook: ends only ever rise.
func (c *checker) record(end fence.Token) {
	if end <= c.recorded {
		c.t.Fatalf("reservation end %d told after %d", end, c.recorded)
	}
	c.recorded = end
}

func (c *checker) Released(_ fence.Kind, name string, session uint64, _ fence.Token, _ int64, _ fsm.EndReason) {
	if c.holder[name] != session {
		c.t.Fatalf("release of %q by session %d, but the holder is %d", name, session, c.holder[name])
	}
	delete(c.holder, name)
}

func (c *checker) WaitEnded(_ fence.Kind, name string, session uint64) {
	q := c.queue[name]
	for i, s := range q {
		if s == session {
			c.queue[name] = append(q[:i:i], q[i+1:]...)
			return
		}
	}
	c.t.Fatalf("session %d left the queue of %q it was not in", session, name)
}

func (c *checker) queued(name string, session uint64) {
	for _, s := range c.queue[name] {
		if s == session {
			return
		}
	}
	c.queue[name] = append(c.queue[name], session)
}

var names = []string{"a", "b", "c"}

// drawTarget draws the time, session, name and seq of a random command
// over a few sessions and names; the seq is sometimes fresh and sometimes
// a retry of an earlier one (seqs holds each session's newest).
func drawTarget(t *rapid.T, seqs map[uint64]uint64, lastSession uint64, names []string) (now int64, session uint64, name string, seq uint64) {
	now = rapid.Int64Range(1, 1<<40).Draw(t, "now")
	session = rapid.Uint64Range(0, lastSession+1).Draw(t, "session")
	name = rapid.SampledFrom(names).Draw(t, "name")
	seq = seqs[session] + 1
	if rapid.IntRange(0, 4).Draw(t, "retry") == 0 && seqs[session] > 0 {
		seq = rapid.Uint64Range(1, seqs[session]).Draw(t, "oldseq")
	} else {
		seqs[session] = seq
	}
	return now, session, name, seq
}

// drawLifecycle sets c to the command of op 0 to 4 that every
// primitive's property test mixes in: sessions created (0, 1), closed (2)
// and expired in old and new terms (3), token reservations and new
// leaders (4). It reports false for another op.
func drawLifecycle(t *rapid.T, c *statev1.Command, op int, session uint64) bool {
	switch op {
	case 0, 1:
		c.Op = &statev1.Command_CreateSession{CreateSession: &statev1.CreateSession{TtlMs: 1000}}
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
	default:
		return false
	}
	return true
}

// drawRelease draws the fields of a release by session with seq: a plain
// one, or sometimes a withdrawal of an earlier (or a future) acquire, or
// of a per-grant acquire (session 0 with a request id).
func drawRelease(t *rapid.T, seqs map[uint64]uint64, now int64, session, seq uint64) (uint64, uint64, uint64, int64, string) {
	switch rapid.IntRange(0, 3).Draw(t, "withdraw") {
	case 0:
		return session, seq, rapid.Uint64Range(1, seqs[session]+2).Draw(t, "withdrawseq"), 0, ""
	case 1:
		return 0, 0, 1, 500, fmt.Sprint("r", now%4)
	}
	return session, seq, 0, 0, ""
}

// drawCommand draws a random command over a few sessions and names, with
// sequence numbers that are sometimes fresh and sometimes retries.
func drawCommand(t *rapid.T, seqs map[uint64]uint64, lastSession uint64) *statev1.Command {
	now, session, name, seq := drawTarget(t, seqs, lastSession, names)
	c := statev1.Command{NowUnixMs: now}
	op := rapid.IntRange(0, 10).Draw(t, "op")
	if drawLifecycle(t, &c, op, session) {
		return &c
	}
	switch op {
	case 5, 6, 7:
		wait := rapid.Bool().Draw(t, "wait")
		if session == 0 {
			c.Op = &statev1.Command_Acquire{Acquire: &statev1.Acquire{Name: name, Wait: wait, TtlMs: 500, RequestId: fmt.Sprint("r", now%4)}}
		} else {
			c.Op = &statev1.Command_Acquire{Acquire: &statev1.Acquire{Session: session, Seq: seq, Name: name, Wait: wait}}
		}
	case 10:
		c.Op = &statev1.Command_KvWrite{KvWrite: &statev1.KVWrite{Key: name, Token: rapid.Uint64Range(0, 30).Draw(t, "token"),
			Value: []byte(fmt.Sprint(now)), Delete: rapid.Bool().Draw(t, "delete"), RequestId: rapid.SampledFrom([]string{"", "a", "b", "c"}).Draw(t, "kvreq"),
			Scoped: rapid.Bool().Draw(t, "scoped")}}
	case 8:
		r := &statev1.Release{Name: name}
		r.Session, r.Seq, r.WithdrawSeq, r.TtlMs, r.RequestId = drawRelease(t, seqs, now, session, seq)
		c.Op = &statev1.Command_Release{Release: r}
	default:
		c.Op = &statev1.Command_CancelWait{CancelWait: &statev1.CancelWait{Session: session, Name: name}}
	}
	return &c
}

// checkReplay checks that restoring snap (taken before command cut; nil
// for the end) and applying rest gives the state of m.
func checkReplay(t *rapid.T, m *fsm.Machine, snap []byte, cut int, rest []*statev1.Command) {
	if snap == nil {
		snap = mustSnapshot(t, m)
	}
	replayed := fsm.New(nil)
	if err := replayed.Restore(snap); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	for _, cmd := range rest {
		replayed.Apply(cmd)
	}
	if got, want := mustSnapshot(t, replayed), mustSnapshot(t, m); !bytes.Equal(got, want) {
		t.Fatalf("snapshot at %d, restore and replay of %d commands gave a different state", cut, len(rest))
	}
}

func initCommand(floor uint64) *statev1.Command {
	return &statev1.Command{Op: &statev1.Command_Init{Init: &statev1.Init{Issuer: "test-issuer", TokenFloor: floor}}}
}

func mustSnapshot(t interface{ Fatalf(string, ...any) }, m *fsm.Machine) []byte {
	b, err := m.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	return b
}

// TestMachine_Properties applies random command sequences and checks, on
// every step: at most one holder per lock; tokens strictly increasing over
// all grants; waiters granted in arrival order; a retried granted acquire
// returns its original token without issuing a new one; and that
// snapshot -> restore -> replay of the rest gives the same state as applying
// everything.
func TestMachine_Properties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := newChecker(t)
		m := fsm.New(c)
		m.SetReservationHook(c.record)
		m.Apply(initCommand(rapid.Uint64Range(0, 1000).Draw(t, "floor")))
		n := rapid.IntRange(1, 300).Draw(t, "n")
		cut := rapid.IntRange(0, n).Draw(t, "cut")
		seqs := map[uint64]uint64{}
		grantedBy := map[[2]uint64]fence.Token{} // (session, seq) -> token
		var rest []*statev1.Command
		var snap []byte
		var lastSession uint64
		for i := 0; i < n; i++ {
			if i == cut {
				snap = mustSnapshot(t, m)
			}
			cmd := drawCommand(t, seqs, lastSession)
			if i >= cut {
				rest = append(rest, cmd)
			}
			before := m.LastToken()
			res := m.Apply(cmd)
			if res.Session > lastSession {
				lastSession = res.Session
			}
			// The kv scope rule: a new scoped write is accepted only with
			// the token of a live grant whose scope covers the key.
			if w := cmd.GetKvWrite(); w != nil && w.GetScoped() && w.GetRequestId() == "" && res.Err == nil {
				if g, ok := m.GrantOf(fence.Token(w.GetToken())); !ok || !fence.ScopeCovers(g.Scope, w.GetKey()) {
					t.Fatalf("scoped write of %q with token %d accepted; the token's grant: %+v, %v", w.GetKey(), w.GetToken(), g, ok)
				}
			}
			if a := cmd.GetAcquire(); a != nil && res.Err == nil {
				key := [2]uint64{a.GetSession(), a.GetSeq()}
				if tok, ok := grantedBy[key]; ok && a.GetSession() != 0 {
					if !res.Granted || res.Grant.Token != tok {
						t.Fatalf("retry of granted acquire %v returned %+v, want token %d", key, res, tok)
					}
					if m.LastToken() != before {
						t.Fatalf("retry of granted acquire %v issued a token", key)
					}
				}
				if res.Granted {
					grantedBy[key] = res.Grant.Token
				}
				if res.Queued {
					c.queued(a.GetName(), res.Session)
				}
			}
		}
		checkReplay(t, m, snap, cut, rest)
		// Every holder the checker tracked is the holder the machine reports.
		for _, name := range names {
			info := m.Lock(name)
			if info.Holder.Session != c.holder[name] {
				t.Fatalf("Lock(%q).Holder.Session=%d, want %d", name, info.Holder.Session, c.holder[name])
			}
		}
	})
}
