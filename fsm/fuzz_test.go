package fsm

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"testing"

	fence "github.com/fenced-dev/fenced"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// Fuzz targets of the state machine. `go test` runs their seed corpora
// (the f.Add calls and testdata/fuzz/<target>/); scripts/fuzz.sh runs each
// under the fuzzing engine.

// fuzzObserver checks the rules every event must keep: at most one holder
// per lock, tokens strictly increasing over all grants, releases and ended
// waits only of sessions that held or waited.
type fuzzObserver struct {
	t      *testing.T
	holder map[string]uint64
	// permits are the live semaphore permits by token (a semaphore has
	// many holders; its own rules are checked in semaphore_property_test).
	permits map[fence.Token]uint64
	last    fence.Token
	live    map[uint64]bool
}

func newFuzzObserver(t *testing.T) *fuzzObserver {
	return &fuzzObserver{t: t, holder: map[string]uint64{}, permits: map[fence.Token]uint64{}, live: map[uint64]bool{}}
}

func (o *fuzzObserver) Granted(g fence.Grant) {
	key := string(g.Kind) + "\x00" + g.Name // one holder per kind and name
	if h, ok := o.holder[key]; ok && g.Kind != fence.KindPermit {
		o.t.Fatalf("grant of %q to session %d while session %d holds it", g.Name, g.Session, h)
	}
	if g.Token <= o.last || !g.Token.Valid() {
		o.t.Fatalf("token %d for %q is not above the previous token %d", g.Token, g.Name, o.last)
	}
	if !o.live[g.Session] {
		o.t.Fatalf("grant of %q to session %d, which is not live", g.Name, g.Session)
	}
	if g.TTL < fence.MinTTL || g.TTL > fence.MaxTTL {
		o.t.Fatalf("grant of %q has ttl %v, outside %v..%v", g.Name, g.TTL, fence.MinTTL, fence.MaxTTL)
	}
	o.last = g.Token
	if g.Kind == fence.KindPermit {
		o.permits[g.Token] = g.Session
		return
	}
	o.holder[key] = g.Session
}

func (o *fuzzObserver) Released(k fence.Kind, name string, session uint64, tok fence.Token, _ int64, _ EndReason) {
	if k == fence.KindPermit {
		if h, ok := o.permits[tok]; !ok || h != session {
			o.t.Fatalf("release of permit %d of %q by session %d, but its holder is %d (held: %v)", tok, name, session, h, ok)
		}
		delete(o.permits, tok)
		return
	}
	key := string(k) + "\x00" + name
	if h, ok := o.holder[key]; !ok || h != session {
		o.t.Fatalf("release of %s %q by session %d, but the holder is %d (held: %v)", k, name, session, h, ok)
	}
	delete(o.holder, key)
}

func (o *fuzzObserver) WaitEnded(_ fence.Kind, name string, session uint64) {
	if !o.live[session] {
		o.t.Fatalf("wait of session %d for %q ended, but the session is not live", session, name)
	}
}

func (o *fuzzObserver) SessionStarted(session uint64, ttlMs int64) {
	if o.live[session] {
		o.t.Fatalf("session %d started twice", session)
	}
	if err := fence.ValidateTTLMillis(ttlMs); err != nil {
		o.t.Fatalf("session %d started with %v", session, err)
	}
	o.live[session] = true
}

func (o *fuzzObserver) SessionEnded(session uint64, _ EndReason) {
	if !o.live[session] {
		o.t.Fatalf("session %d ended but was not live", session)
	}
	for name, h := range o.holder {
		if h == session {
			o.t.Fatalf("session %d ended still holding %q", session, name)
		}
	}
	for tok, h := range o.permits {
		if h == session {
			o.t.Fatalf("session %d ended still holding permit %d", session, tok)
		}
	}
	delete(o.live, session)
}

// byteSource draws values from fuzz input; it returns zeros once the input
// is used up.
type byteSource struct{ b []byte }

func (s *byteSource) byte() byte {
	if len(s.b) == 0 {
		return 0
	}
	v := s.b[0]
	s.b = s.b[1:]
	return v
}

func (s *byteSource) empty() bool { return len(s.b) == 0 }

// ttl draws a TTL in milliseconds, often an edge: in range, just out of
// range, or one whose conversion to time.Duration overflows.
func (s *byteSource) ttl() int64 {
	edges := []int64{100, 1000, 86_400_000, 99, 0, -1, 86_400_001, 1<<58 + 100, math.MaxInt64, math.MinInt64, 9_223_372_036_855}
	return edges[int(s.byte())%len(edges)]
}

var fuzzNames = []string{"a", "b", "c", "a\u202e", ""}

// command draws one command over a few names and sessions.
func (s *byteSource) command(lastSession uint64) *statev1.Command {
	op, arg := s.byte(), s.byte()
	session := uint64(arg) % (lastSession + 2)
	name := fuzzNames[int(arg>>4)%len(fuzzNames)]
	seq := uint64(s.byte() % 80)
	c := &statev1.Command{NowUnixMs: int64(s.byte()) * 1000}
	switch op % 15 {
	case 0:
		c.Op = &statev1.Command_CreateSession{CreateSession: &statev1.CreateSession{TtlMs: s.ttl(), RequestId: string(rune('a' + arg%3))}}
	case 1:
		c.Op = &statev1.Command_CloseSession{CloseSession: &statev1.CloseSession{Session: session}}
	case 2:
		c.Op = &statev1.Command_ExpireSession{ExpireSession: &statev1.ExpireSession{Session: session, Term: uint64(arg % 4)}}
	case 3:
		c.Op = &statev1.Command_NewLeader{NewLeader: &statev1.NewLeader{Term: uint64(arg % 4)}}
	case 4, 5, 6:
		a := &statev1.Acquire{Session: session, Seq: seq, Name: name, Wait: arg&1 == 1}
		if session == 0 {
			a.TtlMs, a.RequestId = s.ttl(), string(rune('p'+arg%3))
		}
		c.Op = &statev1.Command_Acquire{Acquire: a}
	case 7, 8:
		c.Op = &statev1.Command_Release{Release: &statev1.Release{Session: session, Seq: seq, Name: name}}
	case 9:
		c.Op = &statev1.Command_CancelWait{CancelWait: &statev1.CancelWait{Session: session, Name: name}}
	case 10:
		c.Op = &statev1.Command_KvWrite{KvWrite: &statev1.KVWrite{Key: name, Token: uint64(s.byte() % 40), Value: []byte{arg},
			Delete: arg&1 == 1, HasIfVersion: arg&2 == 2, IfVersion: uint64(arg % 3), RequestId: string(rune('k' + arg%3))}}
	case 12:
		c.Op = &statev1.Command_Campaign{Campaign: &statev1.Campaign{Session: session, Seq: seq, Name: name, Value: []byte{arg}}}
	case 13:
		c.Op = &statev1.Command_Resign{Resign: &statev1.Resign{Session: session, Seq: seq, Name: name, WithdrawSeq: uint64(arg>>6) * seq / 2, CancelWait: arg&1 == 1}}
	case 14:
		c.Op = &statev1.Command_Proclaim{Proclaim: &statev1.Proclaim{Session: session, Seq: seq, Name: name, Value: []byte{arg, arg}, Token: uint64(arg % 8)}}
	default:
		addrs := []string{"127.0.0.1:7700", "", "host", "h:0", "[::1]:1"}
		c.Op = &statev1.Command_RegisterNode{RegisterNode: &statev1.RegisterNode{Id: fuzzNames[int(arg)%len(fuzzNames)], ApiAddr: addrs[int(arg>>3)%len(addrs)]}}
	}
	return c
}

// checkTodaysRules checks what the invariants leave to the commands
// (invariants.go): a machine that started empty holds only names and
// registrations today's validation accepts.
func checkTodaysRules(t *testing.T, m *Machine) {
	t.Helper()
	for name := range m.locks.byName {
		if err := fence.ValidateName(name); err != nil {
			t.Fatalf("lock %q in the state: %v", name, err)
		}
	}
	for key := range m.kv.entries {
		if err := fence.ValidateName(key); err != nil {
			t.Fatalf("kv key %q in the state: %v", key, err)
		}
	}
	for id, addr := range m.nodes {
		if err := ValidateNode(id, addr); err != nil {
			t.Fatalf("node registration in the state: %v", err)
		}
	}
}

// snapshotRoundTrip restores m's snapshot into a new machine and checks it
// snapshots to the same bytes.
func snapshotRoundTrip(t *testing.T, m *Machine) {
	t.Helper()
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	m2 := New(nil)
	if err := m2.Restore(snap); err != nil {
		t.Fatalf("Restore of a snapshot the machine made: %v", err)
	}
	again, err := m2.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot after Restore: %v", err)
	}
	if !bytes.Equal(snap, again) {
		t.Fatal("snapshot -> restore -> snapshot changed the bytes")
	}
}

// FuzzMachine applies command sequences drawn from the input and checks,
// after every command, the invariants of the state (invariants.go: a
// holder or waiter is a live session bound to the lock, tokens within the
// counter, no token held twice...) and, through the Observer, that tokens
// strictly increase and a lock has at most one holder; a refused command
// must change nothing; the final state must survive a snapshot round trip.
func FuzzMachine(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 4, 1, 1, 0, 4, 2, 2, 0, 7, 1, 1, 0})
	f.Add([]byte{0, 0, 0, 0, 0, 1, 0, 0, 5, 1, 1, 0, 5, 0x13, 2, 0, 1, 1, 0, 0, 2, 2, 0, 0})
	f.Add([]byte{0, 7, 0, 0, 0, 8, 0, 0, 10, 0, 0, 0, 3, 3, 0, 0, 2, 1, 0, 0, 11, 0, 0})
	f.Add(bytes.Repeat([]byte{4, 0x21, 3, 1, 0, 2, 0, 0, 6, 0x11, 5, 2}, 20))
	f.Fuzz(func(t *testing.T, data []byte) {
		obs := newFuzzObserver(t)
		m := New(obs)
		src := &byteSource{b: data}
		floor := uint64(src.byte())
		if floor == 255 {
			floor = uint64(fence.MaxToken) - 3 // near exhaustion
		}
		if res := m.Apply(&statev1.Command{Op: &statev1.Command_Init{Init: &statev1.Init{Issuer: "fuzz", TokenFloor: floor}}}); res.Err != nil {
			t.Fatalf("init: %v", res.Err)
		}
		for steps := 0; !src.empty() && steps < 500; steps++ {
			c := src.command(m.lastSession)
			before, _ := m.Snapshot()
			last := m.LastToken()
			res := m.Apply(c)
			if err := m.checkInvariants(); err != nil {
				t.Fatalf("after %v: %v", c, err)
			}
			checkTodaysRules(t, m)
			if m.LastToken() < last {
				t.Fatalf("after %v: last token went down from %d to %d", c, last, m.LastToken())
			}
			if res.Err != nil {
				if after, _ := m.Snapshot(); !bytes.Equal(before, after) {
					t.Fatalf("refused command %v (%v) changed the state", c, res.Err)
				}
			}
			if res.Granted && (res.Grant.Token == 0 || res.Grant.Token > m.LastToken()) {
				t.Fatalf("after %v: granted token %d, last token %d", c, res.Grant.Token, m.LastToken())
			}
		}
		for id := range m.sessions {
			if !obs.live[id] {
				t.Fatalf("session %d is in the state but never started", id)
			}
		}
		snapshotRoundTrip(t, m)
	})
}

// FuzzDecodeApply decodes arbitrary bytes as log entries (each prefixed by
// a length byte) and applies those that decode to a machine with a few
// sessions and locks: decoding never panics, and every command, however
// strange its fields, leaves the invariants intact.
func FuzzDecodeApply(f *testing.F) {
	add := func(cmds ...*statev1.Command) {
		var b []byte
		for _, c := range cmds {
			e, err := Encode(c)
			if err != nil {
				f.Fatal(err)
			}
			b = append(b, byte(len(e)))
			b = append(b, e...)
		}
		f.Add(b)
	}
	add(&statev1.Command{Op: &statev1.Command_CreateSession{CreateSession: &statev1.CreateSession{TtlMs: 1<<58 + 100}}})
	add(&statev1.Command{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Name: "x", TtlMs: math.MaxInt64}}})
	add(&statev1.Command{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Session: 1, Seq: 9, Name: "a", Wait: true}}},
		&statev1.Command{Op: &statev1.Command_Release{Release: &statev1.Release{Session: 2, Seq: 1, Name: "a"}}})
	add(&statev1.Command{Op: &statev1.Command_KvWrite{KvWrite: &statev1.KVWrite{Key: "k", Token: 3, Value: []byte("v")}}})
	add(&statev1.Command{Op: &statev1.Command_SemAcquire{SemAcquire: &statev1.SemAcquire{Session: 1, Seq: 9, Name: "a", Capacity: 2, Permits: 2, Wait: true}}},
		&statev1.Command{Op: &statev1.Command_SemAcquire{SemAcquire: &statev1.SemAcquire{Name: "a", Capacity: 3, Permits: 1, TtlMs: 1000, RequestId: "r"}}},
		&statev1.Command{Op: &statev1.Command_SemRelease{SemRelease: &statev1.SemRelease{Session: 1, Seq: 10, Name: "a"}}})
	add(&statev1.Command{Op: &statev1.Command_Init{Init: &statev1.Init{Issuer: "other", TokenFloor: math.MaxUint64}}})
	add(&statev1.Command{Op: &statev1.Command_RegisterNode{RegisterNode: &statev1.RegisterNode{Id: "n\u200b1", ApiAddr: "x:1"}}})
	f.Fuzz(func(t *testing.T, data []byte) {
		m := New(newFuzzObserver(t))
		setup := []*statev1.Command{
			{Op: &statev1.Command_Init{Init: &statev1.Init{Issuer: "fuzz"}}},
			{Op: &statev1.Command_CreateSession{CreateSession: &statev1.CreateSession{TtlMs: 1000}}},
			{Op: &statev1.Command_CreateSession{CreateSession: &statev1.CreateSession{TtlMs: 1000}}},
			{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Session: 1, Seq: 1, Name: "a"}}},
			{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Session: 2, Seq: 1, Name: "a", Wait: true}}},
		}
		for _, c := range setup {
			if res := m.Apply(c); res.Err != nil {
				t.Fatalf("setup %v: %v", c, res.Err)
			}
		}
		for len(data) > 0 {
			n := min(int(data[0]), len(data)-1)
			entry := data[1 : 1+n]
			data = data[1+n:]
			c, err := Decode(entry)
			if err != nil {
				continue
			}
			if again, err := Decode(mustEncode(t, c)); err != nil || !bytes.Equal(mustEncode(t, again), mustEncode(t, c)) {
				t.Fatalf("command %v does not survive encode -> decode: %v", c, err)
			}
			before, _ := m.Snapshot()
			res := m.Apply(c)
			if err := m.checkInvariants(); err != nil {
				t.Fatalf("after %v: %v", c, err)
			}
			checkTodaysRules(t, m)
			if res.Err != nil {
				if after, _ := m.Snapshot(); !bytes.Equal(before, after) {
					t.Fatalf("refused command %v (%v) changed the state", c, res.Err)
				}
			}
		}
		snapshotRoundTrip(t, m)
	})
}

func mustEncode(t *testing.T, c *statev1.Command) []byte {
	t.Helper()
	b, err := Encode(c)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	return b
}

// FuzzRestore restores arbitrary bytes as a snapshot: it never panics, and
// either fails (leaving the machine empty) or gives a state that keeps the
// invariants, survives a snapshot round trip and applies commands without
// breaking them.
func FuzzRestore(f *testing.F) {
	if golden, err := os.ReadFile("testdata/snapshot-v1.bin"); err == nil {
		f.Add(golden)
	}
	m := New(nil)
	for _, c := range []*statev1.Command{
		{Op: &statev1.Command_Init{Init: &statev1.Init{Issuer: "fuzz", TokenFloor: 5}}},
		{Op: &statev1.Command_CreateSession{CreateSession: &statev1.CreateSession{TtlMs: 1000, RequestId: "r"}}},
		{Op: &statev1.Command_CreateSession{CreateSession: &statev1.CreateSession{TtlMs: 2000}}},
		{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Session: 1, Seq: 1, Name: "a"}}},
		{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Session: 2, Seq: 1, Name: "a", Wait: true}}},
		{Op: &statev1.Command_KvWrite{KvWrite: &statev1.KVWrite{Key: "k", Token: 6, Value: []byte("v"), RequestId: "w"}}},
		{Op: &statev1.Command_RegisterNode{RegisterNode: &statev1.RegisterNode{Id: "n1", ApiAddr: "127.0.0.1:7700"}}},
	} {
		m.Apply(c)
	}
	snap, err := m.Snapshot()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(snap)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		m := New(nil)
		if err := m.Restore(data); err != nil {
			if len(m.sessions) != 0 || len(m.locks.byName) != 0 || m.issuer != "" || m.tokens.last != 0 {
				t.Fatalf("failed Restore (%v) left state behind", err)
			}
			return
		}
		if err := m.checkInvariants(); err != nil {
			t.Fatalf("Restore accepted a state that breaks an invariant: %v", err)
		}
		snapshotRoundTrip(t, m)
		// The restored state takes commands without breaking the rules.
		obs := newFuzzObserver(t)
		obs.last = m.LastToken()
		for id := range m.sessions {
			obs.live[id] = true
		}
		for name, l := range m.locks.byName {
			if l.holder != 0 {
				obs.holder[string(fence.KindLock)+"\x00"+name] = l.holder
			}
		}
		for name, e := range m.elections.byName {
			if e.leader != 0 {
				obs.holder[string(fence.KindLeader)+"\x00"+name] = e.leader
			}
		}
		m.obs = obs
		src := &byteSource{b: binary.AppendUvarint(nil, uint64(len(data)))}
		src.b = append(src.b, data[:min(len(data), 64)]...)
		for !src.empty() {
			c := src.command(m.lastSession)
			m.Apply(c)
			if err := m.checkInvariants(); err != nil {
				t.Fatalf("after %v on a restored state: %v", c, err)
			}
		}
	})
}
