package fsm_test

import (
	"bytes"
	"crypto/sha256"
	"testing"
	"time"

	"pgregory.net/rapid"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// delayChecker checks the lock-delay and renewal rules on every event,
// besides the general ones of checker: no grant of a lock in its delay; a
// delay starts only after the end, by expiry or revocation, of the last
// grant of the lock, and only if that grant asked for one, with its
// length; a delay ends only by an EndLockDelay.
type delayChecker struct {
	*checker
	delayed   map[string]fence.Token // name -> the grant whose end started its delay
	lastEnd   map[string]ended       // name -> the newest end of a grant
	delayOf   map[fence.Token]int64  // grant token -> the lock delay it asked for (ms)
	grants    int                    // Granted events so far
	inEndCmd  bool                   // an EndLockDelay is being applied
	endsSeen  int                    // LockDelayEnded events so far
	renewedMs map[uint64]int64       // session -> ttl told by SessionRenewed
	mustDelay map[string]fence.Token // name -> a grant with a delay that just expired or was revoked
	started   int                    // LockDelayStarted events so far
}

type ended struct {
	token  fence.Token
	reason fsm.EndReason
}

func newDelayChecker(t *rapid.T) *delayChecker {
	return &delayChecker{checker: newChecker(t), delayed: map[string]fence.Token{}, lastEnd: map[string]ended{},
		delayOf: map[fence.Token]int64{}, renewedMs: map[uint64]int64{}, mustDelay: map[string]fence.Token{}}
}

func (c *delayChecker) Granted(g fence.Grant) {
	if tok, ok := c.mustDelay[g.Name]; ok {
		c.t.Fatalf("grant of %q (token %d) right after grant %d with a lock delay expired or was revoked", g.Name, g.Token, tok)
	}
	if after, ok := c.delayed[g.Name]; ok {
		c.t.Fatalf("grant of %q (token %d) during its delay after token %d", g.Name, g.Token, after)
	}
	c.grants++
	c.checker.Granted(g)
}

func (c *delayChecker) Released(k fence.Kind, name string, session uint64, tok fence.Token, issuedAt int64, reason fsm.EndReason) {
	c.lastEnd[name] = ended{tok, reason}
	if (reason == fsm.Expired || reason == fsm.Revoked) && c.delayOf[tok] > 0 {
		c.mustDelay[name] = tok
	}
	c.checker.Released(k, name, session, tok, issuedAt, reason)
}

func (c *delayChecker) LockDelayStarted(name string, after fence.Token, length time.Duration) {
	c.started++
	e := c.lastEnd[name]
	switch {
	case e.token != after:
		c.t.Fatalf("delay of %q after token %d, but the last grant to end was %d", name, after, e.token)
	case e.reason != fsm.Expired && e.reason != fsm.Revoked:
		c.t.Fatalf("delay of %q after token %d, which ended %v (not expired or revoked)", name, after, e.reason)
	case c.delayOf[after] == 0:
		c.t.Fatalf("delay of %q after token %d, which asked for none", name, after)
	case length != time.Duration(c.delayOf[after])*time.Millisecond:
		c.t.Fatalf("delay of %q is %v, token %d asked for %dms", name, length, after, c.delayOf[after])
	}
	c.delayed[name] = after
	delete(c.mustDelay, name)
}

func (c *delayChecker) LockDelayEnded(name string, after fence.Token) {
	if !c.inEndCmd {
		c.t.Fatalf("delay of %q ended outside an EndLockDelay", name)
	}
	if c.delayed[name] != after {
		c.t.Fatalf("delay of %q after %d ended, but it was in the delay after %d", name, after, c.delayed[name])
	}
	c.endsSeen++
	delete(c.delayed, name)
}

func (c *delayChecker) SessionRenewed(session uint64, ttlMs int64) { c.renewedMs[session] = ttlMs }

var (
	_ fsm.DelayObserver = (*delayChecker)(nil)
	_ fsm.RenewObserver = (*delayChecker)(nil)
)

// drawDelayCommand draws a command of drawCommand's mix, acquires with a
// random lock delay (sometimes out of range), or a command of this
// feature: EndLockDelay (for a pending delay or not, of any term),
// RenewGrant (by the holder or not, with any token, TTL and secret), or a
// Revoke.
func drawDelayCommand(t *rapid.T, m *fsm.Machine, seqs map[uint64]uint64, lastSession uint64) *statev1.Command {
	name := rapid.SampledFrom(names).Draw(t, "dname")
	now := rapid.Int64Range(1, 1<<40).Draw(t, "dnow")
	switch rapid.IntRange(0, 9).Draw(t, "dop") {
	case 0, 1:
		e := &statev1.EndLockDelay{Name: name, Term: rapid.Uint64Range(0, 4).Draw(t, "endterm")}
		if p := m.PendingDelays(); len(p) > 0 && rapid.IntRange(0, 3).Draw(t, "endright") > 0 {
			d := rapid.SampledFrom(p).Draw(t, "pending")
			e.Name, e.AfterToken = d.Name, uint64(d.After)
		} else {
			e.AfterToken = rapid.Uint64Range(0, uint64(m.LastToken())+1).Draw(t, "endtoken")
		}
		return &statev1.Command{NowUnixMs: now, Op: &statev1.Command_EndLockDelay{EndLockDelay: e}}
	case 2, 3:
		r := &statev1.RenewGrant{Name: name, Session: rapid.Uint64Range(0, lastSession+1).Draw(t, "rsession")}
		if h := m.Lock(name).Holder; h.Session != 0 && rapid.Bool().Draw(t, "rholder") {
			r.Session = h.Session
			if rapid.Bool().Draw(t, "rtoken") {
				r.Token = uint64(h.Token)
			}
		}
		if rapid.IntRange(0, 4).Draw(t, "rbadtoken") == 0 {
			r.Token = rapid.Uint64Range(1, uint64(m.LastToken())+1).Draw(t, "rtok")
		}
		r.TtlMs = rapid.SampledFrom([]int64{0, 0, 200, 1000, 5000, 99, 86400001}).Draw(t, "rttl")
		if rapid.IntRange(0, 5).Draw(t, "rsecret") == 0 {
			h := sha256.Sum256([]byte("not the secret"))
			r.SecretHash = h[:]
		}
		return &statev1.Command{NowUnixMs: now, Op: &statev1.Command_RenewGrant{RenewGrant: r}}
	case 4:
		rv := &statev1.Revoke{Name: name}
		if rapid.Bool().Draw(t, "rvtoken") {
			rv.Token = uint64(m.Lock(name).Holder.Token)
		}
		return &statev1.Command{NowUnixMs: now, Op: &statev1.Command_Revoke{Revoke: rv}}
	}
	cmd := drawCommand(t, seqs, lastSession)
	if a := cmd.GetAcquire(); a != nil {
		a.LockDelayMs = rapid.SampledFrom([]int64{0, 0, 1, 250, 60000, 60001, -1}).Draw(t, "delay")
	}
	return cmd
}

// TestLockDelay_Properties applies random sequences of sessions, acquires
// with and without lock delays, releases, closes, expiries, revocations,
// new leaders, delay ends and renewals, and checks on every step: no lock
// is granted during its delay; a delay starts only after an expiry or a
// revocation (never a release or close) of a grant that asked for one,
// and always does then; an EndLockDelay from an older term, or for another
// delay, is ignored and changes nothing; a renewal never grants, never
// issues a token and never changes the grant's token, and one by a session
// that does not hold the lock changes nothing; an invalid command changes
// nothing; and snapshot -> restore -> replay gives the same state as
// applying everything.
func TestLockDelay_Properties(t *testing.T) {
	var seen struct{ delays, ends, renewed, notOwned, oldEnds int }
	defer func() {
		// The sequences must reach what the rules are about.
		if seen.delays == 0 || seen.ends == 0 || seen.renewed == 0 || seen.notOwned == 0 || seen.oldEnds == 0 {
			t.Errorf("the sequences reached too little: %+v", seen)
		}
		t.Logf("reached: %+v", seen)
	}()
	rapid.Check(t, func(t *rapid.T) {
		c := newDelayChecker(t)
		m := fsm.New(c)
		m.Apply(initCommand(0))
		n := rapid.IntRange(1, 300).Draw(t, "n")
		cut := rapid.IntRange(0, n).Draw(t, "cut")
		seqs := map[uint64]uint64{}
		var rest []*statev1.Command
		var snap []byte
		var lastSession uint64
		for i := 0; i < n; i++ {
			if i == cut {
				snap = mustSnapshot(t, m)
			}
			cmd := drawDelayCommand(t, m, seqs, lastSession)
			if i >= cut {
				rest = append(rest, cmd)
			}
			before, beforeTok, beforeTerm, grants := mustSnapshot(t, m), m.LastToken(), m.LeaderTerm(), c.grants
			var held fence.Grant
			if r := cmd.GetRenewGrant(); r != nil {
				held = m.Lock(r.GetName()).Holder
			}
			c.inEndCmd = cmd.GetEndLockDelay() != nil
			ends := c.endsSeen
			res := m.Apply(cmd)
			c.inEndCmd = false
			for name, tok := range c.mustDelay {
				t.Fatalf("grant %d of %q ended %v with a lock delay of %dms, but no delay started", tok, name, c.lastEnd[name].reason, c.delayOf[tok])
			}
			if res.Session > lastSession {
				lastSession = res.Session
			}
			unchanged := func(why string) {
				if !bytes.Equal(mustSnapshot(t, m), before) {
					t.Fatalf("%s changed the state: %v", why, cmd)
				}
			}
			if res.Err != nil {
				unchanged("a refused command (" + res.Err.Error() + ")")
			}
			if a := cmd.GetAcquire(); a != nil && res.Queued {
				c.queued(a.GetName(), res.Session)
			}
			if e := cmd.GetEndLockDelay(); e != nil {
				if e.GetTerm() < beforeTerm && !res.Ignored {
					t.Fatalf("EndLockDelay of term %d applied after leadership %d", e.GetTerm(), beforeTerm)
				}
				if e.GetTerm() < beforeTerm && isPending(m, e) {
					seen.oldEnds++
				}
				if res.Ignored {
					unchanged("an ignored EndLockDelay")
				} else if seen.ends++; c.endsSeen != ends+1 {
					t.Fatalf("EndLockDelay %v applied without ending a delay", e)
				}
			}
			if r := cmd.GetRenewGrant(); r != nil {
				if c.grants != grants || m.LastToken() != beforeTok {
					t.Fatalf("renewal %v granted or issued a token", r)
				}
				if now := m.Lock(r.GetName()).Holder; now.Token != held.Token || now.Session != held.Session {
					t.Fatalf("renewal %v changed the grant from %+v to %+v", r, held, now)
				}
				if res.Granted {
					seen.renewed++
				} else if res.Err == nil {
					seen.notOwned++
				}
				switch {
				case res.Granted && (res.Grant.Token != held.Token || res.Grant.Session != r.GetSession()):
					t.Fatalf("renewal %v returned %+v, the holder was %+v", r, res.Grant, held)
				case res.Granted && r.GetTtlMs() != 0 && c.renewedMs[r.GetSession()] != r.GetTtlMs():
					t.Fatalf("renewal %v: observer told ttl %d", r, c.renewedMs[r.GetSession()])
				case !res.Granted:
					unchanged("a renewal not granted")
				}
			}
			// Every delay the machine holds is one the checker saw start,
			// and a delayed lock has no holder.
			for _, name := range names {
				info := m.Lock(name)
				if info.Held() {
					if _, seen := c.delayOf[info.Holder.Token]; !seen {
						c.delayOf[info.Holder.Token] = info.Delay.Holder.Milliseconds()
					}
				}
				if info.Delay.Pending != (c.delayed[name] != 0) || (info.Delay.Pending && info.Delay.After != c.delayed[name]) {
					t.Fatalf("Lock(%q).Delay=%+v, the checker saw the delay after %d", name, info.Delay, c.delayed[name])
				}
				if info.Delay.Pending && info.Held() {
					t.Fatalf("Lock(%q) is held during its delay", name)
				}
			}
		}
		seen.delays += c.started
		checkReplay(t, m, snap, cut, rest)
	})
}

// isPending reports whether e names a delay the machine still holds.
func isPending(m *fsm.Machine, e *statev1.EndLockDelay) bool {
	for _, d := range m.PendingDelays() {
		if d.Name == e.GetName() && uint64(d.After) == e.GetAfterToken() {
			return true
		}
	}
	return false
}
