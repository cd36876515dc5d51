package fsm_test

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// rwModel is an Observer that keeps its own model of every read/write lock
// from the events and the results, and checks on every grant: never a
// writer with anyone else; a grant while requests wait goes to the first
// of them (one FIFO queue for both modes, so no reader overtakes a waiting
// writer); tokens strictly increasing over all grants, and a writer's
// token above every reader's before it. After every command it checks
// that the first waiter of each lock could not have been admitted (so the
// readers queued together behind a writer were all admitted when it left)
// and that the machine's description matches the model.
type rwModel struct {
	fsm.NopObserver
	t       *rapid.T
	holders map[string]map[uint64]rwHeld
	queue   map[string][]fsm.RWWaiter
	maxRead map[string]fence.Token
	lock    map[string]uint64 // holders of the exclusive locks of the same names
	last    fence.Token
	// pending is the mode of the acquire being applied, for its grant.
	pending *fsm.RWWaiter
}

type rwHeld struct {
	write bool
	token fence.Token
}

func newRWModel(t *rapid.T) *rwModel {
	return &rwModel{t: t, holders: map[string]map[uint64]rwHeld{}, queue: map[string][]fsm.RWWaiter{}, maxRead: map[string]fence.Token{}, lock: map[string]uint64{}}
}

func (c *rwModel) Granted(g fence.Grant) {
	if g.Token <= c.last {
		c.t.Fatalf("token %d for %s %q is not above the previous token %d", g.Token, g.Kind, g.Name, c.last)
	}
	c.last = g.Token
	if g.Kind == fence.KindLock {
		if h, ok := c.lock[g.Name]; ok {
			c.t.Fatalf("lock %q granted to session %d while session %d holds it", g.Name, g.Session, h)
		}
		c.lock[g.Name] = g.Session
		return
	}
	var write bool
	if q := c.queue[g.Name]; len(q) > 0 {
		if q[0].Session != g.Session {
			c.t.Fatalf("%q granted to session %d while session %d waits first (queue %v)", g.Name, g.Session, q[0].Session, q)
		}
		write = q[0].Write
		c.queue[g.Name] = q[1:]
	} else if c.pending != nil {
		write = c.pending.Write
	} else {
		c.t.Fatalf("%q granted to session %d, which neither asked nor waited", g.Name, g.Session)
	}
	hs := c.holders[g.Name]
	if hs == nil {
		hs = map[uint64]rwHeld{}
		c.holders[g.Name] = hs
	}
	for s, h := range hs {
		if write || h.write {
			c.t.Fatalf("%q: %s grant to session %d while session %d holds a %s grant", g.Name, modeWord(write), g.Session, s, modeWord(h.write))
		}
	}
	if g.Kind != rwKind(write) || g.Scope != g.Name {
		c.t.Fatalf("%q: a %s grant to session %d has kind %q and scope %q", g.Name, modeWord(write), g.Session, g.Kind, g.Scope)
	}
	if write && g.Token <= c.maxRead[g.Name] {
		c.t.Fatalf("writer token %d for %q is not above reader token %d", g.Token, g.Name, c.maxRead[g.Name])
	}
	if !write {
		c.maxRead[g.Name] = g.Token
	}
	hs[g.Session] = rwHeld{write: write, token: g.Token}
}

func (c *rwModel) Released(k fence.Kind, name string, session uint64, tok fence.Token, _ int64, _ fsm.EndReason) {
	if k == fence.KindLock {
		if c.lock[name] != session {
			c.t.Fatalf("release of lock %q by session %d, but the holder is %d", name, session, c.lock[name])
		}
		delete(c.lock, name)
		return
	}
	h, ok := c.holders[name][session]
	if !ok || h.token != tok || k != rwKind(h.write) {
		c.t.Fatalf("release of %q by session %d with token %d, which it does not hold (%+v)", name, session, tok, c.holders[name])
	}
	delete(c.holders[name], session)
}

func (c *rwModel) WaitEnded(k fence.Kind, name string, session uint64) {
	if k == fence.KindLock {
		return
	}
	q := c.queue[name]
	i := slices.IndexFunc(q, func(w fsm.RWWaiter) bool { return w.Session == session })
	if i < 0 || rwKind(q[i].Write) != k {
		c.t.Fatalf("session %d left the queue of %q it was not in", session, name)
	}
	c.queue[name] = slices.Delete(slices.Clone(q), i, i+1)
}

func (c *rwModel) queued(name string, session uint64, write bool) {
	if !slices.ContainsFunc(c.queue[name], func(w fsm.RWWaiter) bool { return w.Session == session }) {
		c.queue[name] = append(c.queue[name], fsm.RWWaiter{Session: session, Write: write})
	}
}

// check compares the machine with the model after a command.
func (c *rwModel) check(m *fsm.Machine) {
	for _, name := range rwNames {
		info := m.RWLock(name)
		hs := c.holders[name]
		writer, readers := false, 0
		for _, h := range hs {
			writer = writer || h.write
			readers += boolInt(!h.write)
		}
		if q := c.queue[name]; len(q) > 0 && m.LastToken() < fence.MaxToken && (len(hs) == 0 || !q[0].Write && !writer) {
			c.t.Fatalf("%q: first waiter %+v could be admitted but waits (holders %+v)", name, q[0], hs)
		}
		if got := len(info.Readers); got != readers || (info.Writer.Token != 0) != writer {
			c.t.Fatalf("RWLock(%q) has %d readers and writer %v, want %d readers and writer %v", name, got, info.Writer.Token != 0, readers, writer)
		}
		for _, g := range append(slices.Clone(info.Readers), info.Writer) {
			if g.Token != 0 && hs[g.Session].token != g.Token {
				c.t.Fatalf("RWLock(%q) lists session %d with token %d, want %d", name, g.Session, g.Token, hs[g.Session].token)
			}
		}
		if !slices.Equal(info.Waiters, c.queue[name]) && !(len(info.Waiters) == 0 && len(c.queue[name]) == 0) {
			c.t.Fatalf("RWLock(%q).Waiters=%v, want %v", name, info.Waiters, c.queue[name])
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func modeWord(write bool) string {
	if write {
		return "write"
	}
	return "read"
}

var rwNames = []string{"a", "b"}

func rwKind(write bool) fence.Kind {
	if write {
		return fence.KindWrite
	}
	return fence.KindRead
}

func rwMode(write bool) statev1.RWMode {
	if write {
		return statev1.RWMode_RW_MODE_WRITE
	}
	return statev1.RWMode_RW_MODE_READ
}

// drawRWCommand draws a random command over a few sessions and two names:
// sessions created, closed and expired (in old and new terms), new
// leaders, token reservations, read and write acquires (try and wait, on
// a session or one-shot), releases, withdrawals of earlier (or future)
// acquires and of one-shot ones, and cancelled waits; seqs are sometimes
// retries.
func drawRWCommand(t *rapid.T, seqs map[uint64]uint64, lastSession uint64) *statev1.Command {
	now, session, name, seq := drawTarget(t, seqs, lastSession, rwNames)
	c := statev1.Command{NowUnixMs: now}
	op := rapid.IntRange(0, 13).Draw(t, "op")
	if drawLifecycle(t, &c, op, session) {
		return &c
	}
	switch op {
	case 12:
		// An exclusive lock of the same name, with the same seqs: it must
		// never share a grant, a queue or a remembered answer with the
		// read/write lock.
		c.Op = &statev1.Command_Acquire{Acquire: &statev1.Acquire{Session: session, Seq: seq, Name: name, Wait: rapid.Bool().Draw(t, "lockwait")}}
	case 13:
		c.Op = &statev1.Command_Release{Release: &statev1.Release{Session: session, Seq: seq, Name: name}}
	case 5, 6, 7, 8:
		a := &statev1.RWAcquire{Session: session, Seq: seq, Name: name, Wait: rapid.Bool().Draw(t, "wait"), Mode: rwMode(rapid.IntRange(0, 2).Draw(t, "write") == 0)}
		if session == 0 {
			a.Seq, a.TtlMs, a.RequestId = 0, 500, fmt.Sprint("r", now%4)
		}
		c.Op = &statev1.Command_RwAcquire{RwAcquire: a}
	case 9, 10:
		r := &statev1.RWRelease{Name: name}
		r.Session, r.Seq, r.WithdrawSeq, r.TtlMs, r.RequestId = drawRelease(t, seqs, now, session, seq)
		c.Op = &statev1.Command_RwRelease{RwRelease: r}
	default:
		c.Op = &statev1.Command_RwCancelWait{RwCancelWait: &statev1.RWCancelWait{Session: session, Name: name}}
	}
	return &c
}

// TestRWLock_Properties applies random command sequences and checks, on
// every step, the rules of rwModel and the invariants of the state; that a retried granted acquire returns
// its original token without issuing one; and that snapshot -> restore ->
// replay of the rest gives the same state as applying everything.
func TestRWLock_Properties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := newRWModel(t)
		m := fsm.New(c)
		m.Apply(initCommand(rapid.Uint64Range(0, 1000).Draw(t, "floor")))
		n := rapid.IntRange(1, 300).Draw(t, "n")
		cut := rapid.IntRange(0, n).Draw(t, "cut")
		seqs := map[uint64]uint64{}
		type granted struct {
			token fence.Token
			rw    bool
		}
		grantedBy := map[[2]uint64]granted{} // (session, seq) -> grant
		var rest []*statev1.Command
		var snap []byte
		var lastSession uint64
		for i := 0; i < n; i++ {
			if i == cut {
				snap = mustSnapshot(t, m)
			}
			cmd := drawRWCommand(t, seqs, lastSession)
			if i >= cut {
				rest = append(rest, cmd)
			}
			a := cmd.GetRwAcquire()
			c.pending = nil
			if a != nil {
				c.pending = &fsm.RWWaiter{Write: a.GetMode() == statev1.RWMode_RW_MODE_WRITE}
			}
			var key [2]uint64
			isAcquire := a != nil || cmd.GetAcquire() != nil
			if a != nil {
				key = [2]uint64{a.GetSession(), a.GetSeq()}
			} else if la := cmd.GetAcquire(); la != nil {
				key = [2]uint64{la.GetSession(), la.GetSeq()}
			}
			before := m.LastToken()
			res := m.Apply(cmd)
			if res.Session > lastSession {
				lastSession = res.Session
			}
			if isAcquire && res.Err == nil && key[0] != 0 {
				if g, ok := grantedBy[key]; ok && g.rw == (a != nil) {
					if !res.Granted || res.Grant.Token != g.token {
						t.Fatalf("retry of granted acquire %v returned %+v, want token %d", key, res, g.token)
					}
					if m.LastToken() != before {
						t.Fatalf("retry of granted acquire %v issued a token", key)
					}
				} else if ok && res.Granted && res.Grant.Token == g.token {
					t.Fatalf("acquire %v of a %s was answered with the grant (token %d) of the other primitive's acquire of that seq", key, res.Grant.Kind, g.token)
				}
				if res.Granted {
					grantedBy[key] = granted{token: res.Grant.Token, rw: a != nil}
				}
			}
			if a != nil && res.Err == nil && res.Queued {
				c.queued(a.GetName(), res.Session, c.pending.Write)
			}
			c.check(m)
			// Restore checks every invariant of the state (invariants.go).
			if err := fsm.New(nil).Restore(mustSnapshot(t, m)); err != nil {
				t.Fatalf("after %v: %v", cmd, err)
			}
		}
		checkReplay(t, m, snap, cut, rest)
	})
}
