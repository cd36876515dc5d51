package fsm_test

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// semChecker is an Observer that keeps its own model of every semaphore
// from the events alone and checks the semaphore's rules on every event:
// never more live permits than the capacity, no slot at or above it, slots
// unique among live permits, tokens strictly increasing over all grants,
// waiters served in arrival order with a new request never served while
// others wait (no overtaking), and a released permit is one that is live.
type semChecker struct {
	fsm.NopObserver
	t *rapid.T
	// live is the model: name -> slot -> permit.
	live     map[string]map[uint32]fsmPermit
	capacity map[string]uint32
	queue    map[string][]semWaiter
	last     fence.Token
	// applying is the command being applied; serving is the waiter whose
	// permits are being issued, with how many are still to come.
	applying *statev1.SemAcquire
	serving  map[string]*semWaiter
}

type fsmPermit struct {
	session uint64
	token   fence.Token
}

type semWaiter struct {
	session uint64
	want    uint32
}

func newSemChecker(t *rapid.T) *semChecker {
	return &semChecker{t: t, live: map[string]map[uint32]fsmPermit{}, capacity: map[string]uint32{},
		queue: map[string][]semWaiter{}, serving: map[string]*semWaiter{}}
}

func (c *semChecker) idle(name string) bool { return len(c.live[name]) == 0 && len(c.queue[name]) == 0 }

func (c *semChecker) Granted(g fence.Grant) {
	if g.Kind != fence.KindPermit {
		c.t.Fatalf("grant of kind %q, want %q", g.Kind, fence.KindPermit)
	}
	name := g.Name
	slot, err := strconv.ParseUint(strings.TrimPrefix(g.Scope, name+"/"), 10, 32)
	if err != nil || !strings.HasPrefix(g.Scope, name+"/") {
		c.t.Fatalf("permit of %q has scope %q, want %q/slot", name, g.Scope, name)
	}
	if g.Token <= c.last {
		c.t.Fatalf("token %d for %q is not above the previous token %d", g.Token, g.Scope, c.last)
	}
	c.last = g.Token
	if c.idle(name) && c.serving[name] == nil {
		// The first permit of a semaphore not in use: the command being
		// applied sets its capacity.
		if c.applying == nil || c.applying.GetName() != name {
			c.t.Fatalf("permit of %q not in use granted outside an acquire of it", name)
		}
		c.capacity[name] = c.applying.GetCapacity()
	}
	capacity := c.capacity[name]
	if s := c.serving[name]; s != nil && s.session != g.Session {
		c.t.Fatalf("%q: permit granted to session %d while session %d's %d permits are still to come", name, g.Session, s.session, s.want)
	}
	if c.serving[name] == nil {
		// The first permit of a request: a queued one must be the head; a
		// new one may be served only while nobody waits.
		q := c.queue[name]
		switch {
		case len(q) > 0 && q[0].session == g.Session:
			c.serving[name] = &semWaiter{session: g.Session, want: q[0].want}
			c.queue[name] = q[1:]
		case len(q) > 0:
			c.t.Fatalf("%q: permit granted to session %d, but session %d waits at the head (queue %v)", name, g.Session, q[0].session, q)
		case c.applying == nil || c.applying.GetName() != name:
			c.t.Fatalf("%q: permit granted to session %d, which neither waits nor asks now", name, g.Session)
		default:
			c.serving[name] = &semWaiter{session: g.Session, want: c.applying.GetPermits()}
		}
	}
	if uint32(slot) >= capacity {
		c.t.Fatalf("%q: slot %d is not below the capacity %d", name, slot, capacity)
	}
	if p, dup := c.live[name][uint32(slot)]; dup {
		c.t.Fatalf("%q: slot %d granted to session %d while session %d holds it (token %d)", name, slot, g.Session, p.session, p.token)
	}
	if uint32(len(c.live[name])) >= capacity {
		c.t.Fatalf("%q: a permit granted with %d of %d live", name, len(c.live[name]), capacity)
	}
	if c.live[name] == nil {
		c.live[name] = map[uint32]fsmPermit{}
	}
	c.live[name][uint32(slot)] = fsmPermit{session: g.Session, token: g.Token}
	if s := c.serving[name]; s != nil {
		if s.want--; s.want == 0 {
			delete(c.serving, name)
		}
	}
}

func (c *semChecker) Released(k fence.Kind, name string, session uint64, tok fence.Token, _ int64, _ fsm.EndReason) {
	for slot, p := range c.live[name] {
		if p.token == tok {
			if p.session != session {
				c.t.Fatalf("%q: token %d released for session %d, held by %d", name, tok, session, p.session)
			}
			delete(c.live[name], slot)
			return
		}
	}
	c.t.Fatalf("%q: release of token %d (session %d), which is not live", name, tok, session)
}

func (c *semChecker) WaitEnded(k fence.Kind, name string, session uint64) {
	q := c.queue[name]
	for i, w := range q {
		if w.session == session {
			c.queue[name] = append(q[:i:i], q[i+1:]...)
			return
		}
	}
	c.t.Fatalf("session %d left the queue of %q it was not in", session, name)
}

// settled checks the state between commands: every permit request was
// issued whole, and the head waiter does not fit in the free permits (it
// would have been served: nobody waits behind a request that fits).
func (c *semChecker) settled() {
	for name, s := range c.serving {
		c.t.Fatalf("%q: session %d got only part of its permits (%d missing)", name, s.session, s.want)
	}
	for name, q := range c.queue {
		if len(q) > 0 && q[0].want <= c.capacity[name]-uint32(len(c.live[name])) {
			c.t.Fatalf("%q: the head waiter (session %d) asks for %d permits, %d of %d are free, and it was not served",
				name, q[0].session, q[0].want, c.capacity[name]-uint32(len(c.live[name])), c.capacity[name])
		}
	}
}

var semNames = []string{"p", "q"}

// drawSemCommand draws a random command over a few sessions and two
// semaphores: acquires of 1 to 4 permits of capacity 3 (sometimes 2 or 4,
// which must be refused while the semaphore is in use), try or wait,
// per-grant or on a session; releases; withdrawals of earlier, future and
// per-grant acquires; cancelled waits; session closes and expiries in
// several terms; new leaders; retries of earlier seqs.
func drawSemCommand(t *rapid.T, seqs map[uint64]uint64, lastSession uint64) (cmd *statev1.Command, fresh bool) {
	now := rapid.Int64Range(1, 1<<40).Draw(t, "now")
	session := rapid.Uint64Range(0, lastSession+1).Draw(t, "session")
	name := rapid.SampledFrom(semNames).Draw(t, "name")
	seq := seqs[session] + 1
	fresh = true
	if rapid.IntRange(0, 4).Draw(t, "retry") == 0 && seqs[session] > 0 {
		seq, fresh = rapid.Uint64Range(1, seqs[session]).Draw(t, "oldseq"), false
	} else {
		seqs[session] = seq
	}
	c := &statev1.Command{NowUnixMs: now}
	switch rapid.IntRange(0, 11).Draw(t, "op") {
	case 0, 1:
		c.Op = &statev1.Command_CreateSession{CreateSession: &statev1.CreateSession{TtlMs: 1000}}
	case 2:
		c.Op = &statev1.Command_CloseSession{CloseSession: &statev1.CloseSession{Session: session}}
	case 3:
		c.Op = &statev1.Command_ExpireSession{ExpireSession: &statev1.ExpireSession{Session: session, Term: rapid.Uint64Range(0, 3).Draw(t, "term")}}
	case 4:
		c.Op = &statev1.Command_NewLeader{NewLeader: &statev1.NewLeader{Term: rapid.Uint64Range(0, 3).Draw(t, "term")}}
	case 5, 6, 7, 8:
		capacity := uint32(3)
		if rapid.IntRange(0, 5).Draw(t, "othercap") == 0 {
			capacity = rapid.SampledFrom([]uint32{2, 4}).Draw(t, "capacity")
		}
		a := &statev1.SemAcquire{Name: name, Capacity: capacity, Permits: rapid.Uint32Range(1, min(capacity, 3)).Draw(t, "permits"),
			Wait: rapid.Bool().Draw(t, "wait")}
		if session == 0 {
			a.TtlMs, a.RequestId = 500, fmt.Sprint("r", now%4)
		} else {
			a.Session, a.Seq = session, seq
		}
		c.Op = &statev1.Command_SemAcquire{SemAcquire: a}
	case 9, 10:
		r := &statev1.SemRelease{Session: session, Seq: seq, Name: name}
		switch rapid.IntRange(0, 3).Draw(t, "withdraw") {
		case 0:
			r.WithdrawSeq = rapid.Uint64Range(1, seqs[session]+2).Draw(t, "withdrawseq")
		case 1:
			r.Session, r.Seq, r.WithdrawSeq, r.TtlMs, r.RequestId = 0, 0, 1, 500, fmt.Sprint("r", now%4)
		}
		c.Op = &statev1.Command_SemRelease{SemRelease: r}
	default:
		c.Op = &statev1.Command_SemCancelWait{SemCancelWait: &statev1.SemCancelWait{Session: session, Name: name}}
	}
	return c, fresh
}

// TestSemaphore_Properties applies random command sequences and checks on
// every event the rules of semChecker, after every command the state's
// invariants, that a capacity other than the one in use is refused, that
// every refused command changes nothing, that a retried granted acquire returns its original
// permits without issuing a token, and that snapshot -> restore -> replay
// of the rest gives the same state as applying everything.
func TestSemaphore_Properties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := newSemChecker(t)
		m := fsm.New(c)
		m.Apply(initCommand(rapid.Uint64Range(0, 1000).Draw(t, "floor")))
		n := rapid.IntRange(20, 400).Draw(t, "n")
		cut := rapid.IntRange(0, n).Draw(t, "cut")
		seqs := map[uint64]uint64{}
		grantedBy := map[[2]uint64][]fsm.Permit{} // (session, seq) -> permits
		var rest []*statev1.Command
		var snap []byte
		var lastSession uint64
		perGrant := map[uint64]bool{}       // sessions created by a per-grant acquire (its seq 1)
		withdrawn := map[[2]uint64]string{} // withdrawn (session, seq) -> name
		var sent []*statev1.Command         // acquires applied so far, to resend
		// released are the (session, seq) of the releases applied: a later
		// release of the same seq is answered with that first result and
		// does nothing, whatever withdraw_seq it carries.
		released := map[[2]uint64]bool{}
		for i := 0; i < n; i++ {
			if i == cut {
				snap = mustSnapshot(t, m)
			}
			cmd, fresh := drawSemCommand(t, seqs, lastSession)
			if len(sent) > 0 && rapid.IntRange(0, 5).Draw(t, "resend") == 0 {
				// A retry as a client sends it: the same acquire again.
				cmd, fresh = proto.Clone(rapid.SampledFrom(sent).Draw(t, "resent")).(*statev1.Command), false
			}
			if cmd.GetSemAcquire() != nil {
				sent = append(sent, cmd)
			}
			if a := cmd.GetSemAcquire(); a != nil && perGrant[a.GetSession()] && a.GetSeq() == 1 {
				fresh = false
			}
			if i >= cut {
				rest = append(rest, cmd)
			}
			a := cmd.GetSemAcquire()
			inUse := a != nil && !c.idle(a.GetName())
			mismatch := inUse && a.GetCapacity() != c.capacity[a.GetName()]
			before := mustSnapshot(t, m)
			beforeToken := m.LastToken()
			_, wasLive := m.Session(cmd.GetSemRelease().GetSession())
			c.applying = a
			res := m.Apply(cmd)
			c.applying = nil
			c.settled()
			if err := fsm.CheckInvariants(m); err != nil {
				t.Fatalf("after %v: %v", cmd, err)
			}
			if res.Err != nil && !bytes.Equal(before, mustSnapshot(t, m)) {
				t.Fatalf("refused command %v (%v) changed the state", cmd, res.Err)
			}
			if res.Session > lastSession {
				lastSession = res.Session
			}
			if a != nil && a.GetSession() == 0 && res.Session != 0 {
				perGrant[res.Session] = true
			}
			r := cmd.GetSemRelease()
			retried := r != nil && released[[2]uint64{r.GetSession(), r.GetSeq()}]
			if r != nil && r.GetSession() != 0 && r.GetSeq() != 0 && wasLive && res.Err == nil {
				released[[2]uint64{r.GetSession(), r.GetSeq()}] = true
			}
			if r != nil && r.GetWithdrawSeq() != 0 && wasLive && res.Err == nil && !retried {
				// A withdrawal undoes its acquire: none of the permits it
				// was granted is live any more, and a copy of it applied
				// later is refused.
				key := [2]uint64{r.GetSession(), r.GetWithdrawSeq()}
				for _, p := range grantedBy[key] {
					if _, live := c.live[r.GetName()][p.Slot]; live && c.live[r.GetName()][p.Slot].token == p.Grant.Token {
						t.Fatalf("withdrawal of %v left its permit %d (slot %d) live", key, p.Grant.Token, p.Slot)
					}
				}
				withdrawn[key] = r.GetName()
			}
			if a == nil {
				continue
			}
			key := [2]uint64{a.GetSession(), a.GetSeq()}
			if name, ok := withdrawn[key]; ok && name == a.GetName() && a.GetSession() != 0 && res.Err == nil {
				t.Fatalf("acquire %v was applied after a withdrawal of it: %+v", key, res)
			}
			if mismatch && fresh && a.GetSession() != 0 {
				// Refused: a capacity mismatch, or another refusal of a seq a
				// withdrawal reserved.
				if res.Err == nil {
					t.Fatalf("acquire of capacity %d of %q in use with capacity %d: %+v, want a capacity mismatch", a.GetCapacity(), a.GetName(), c.capacity[a.GetName()], res)
				}
			}
			if res.Err != nil {
				continue
			}
			if ps, ok := grantedBy[key]; ok && a.GetSession() != 0 && res.Granted {
				if fmt.Sprint(ps) != fmt.Sprint(res.Permits) || m.LastToken() != beforeToken {
					t.Fatalf("retry of granted acquire %v returned %v (last token %d -> %d), want %v and no new token", key, res.Permits, beforeToken, m.LastToken(), ps)
				}
			}
			if res.Granted {
				if len(res.Permits) != int(a.GetPermits()) && fresh && a.GetSession() != 0 {
					t.Fatalf("acquire of %d permits granted %d", a.GetPermits(), len(res.Permits))
				}
				grantedBy[key] = res.Permits
			}
			if res.Queued {
				found := false
				for _, w := range c.queue[a.GetName()] {
					found = found || w.session == res.Session
				}
				if !found {
					c.queue[a.GetName()] = append(c.queue[a.GetName()], semWaiter{session: res.Session, want: a.GetPermits()})
				}
			}
		}
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
		// The model's permits are the machine's.
		for _, name := range semNames {
			info := m.Semaphore(name)
			got := map[uint32]fsmPermit{}
			for _, p := range info.Permits {
				got[p.Slot] = fsmPermit{session: p.Grant.Session, token: p.Grant.Token}
			}
			if fmt.Sprint(got) != fmt.Sprint(c.live[name]) {
				t.Fatalf("Semaphore(%q) permits %v, the events say %v", name, got, c.live[name])
			}
		}
	})
}
