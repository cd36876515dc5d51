package checker

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/check/history"
)

// ckSim simulates the workload of `fenced check` against a correct
// cluster, or one with a bug, to make large realistic histories: client
// processes take one of a few locks (try-acquire), read and write the
// lock's key under the token, and release, or are paused until their
// session expires and then write with their old token (rejected, or
// accepted by a buggy kv); some requests time out, applied or not. Every
// operation takes effect at one instant inside its interval, in the order
// of those instants. Three nodes log the committed events; one restarts
// and re-applies part of its log.
type ckSim struct {
	rng *rand.Rand
	h   history.History

	// unknownOneIn is how rare timed-out requests are: one in this many
	// (50 unless set).
	unknownOneIn int

	// Bugs.
	unfenced    bool   // the kv accepts writes below the watermark
	resetTokens uint64 // the token counter restarts from 1 at this many grants

	// The cluster's state.
	token, grants, seq, sessions uint64
	holders                      map[string]ckSimGrant
	kv                           map[string]kvModelState
	events                       history.History // committed events, node "" (replicated at the end)
}

type ckSimGrant struct{ session, token uint64 }

// ckSimProc is one client process: the grant it believes it holds, the
// operations it still means to do under it, and its next operation.
type ckSimProc struct {
	id      string
	grant   ckSimGrant
	name    string
	todo    int      // writes left under the grant
	zombie  bool     // paused past its session: still writes with its token
	n       int      // operations done, for unique values
	pending history. // invoked, not yet applied
		Op
	at int64
}

type ckSimQueue []*ckSimProc

func (q ckSimQueue) Len() int           { return len(q) }
func (q ckSimQueue) Less(i, j int) bool { return q[i].at < q[j].at }
func (q ckSimQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *ckSimQueue) Push(x any)        { *q = append(*q, x.(*ckSimProc)) }
func (q *ckSimQueue) Pop() any {
	old := *q
	p := old[len(old)-1]
	*q = old[:len(old)-1]
	return p
}

// ckSimulate returns a history of at least n entries from procs processes
// on locks locks, and the options to check it with. bug, if not nil,
// breaks the simulated cluster.
func ckSimulate(seed uint64, n, procs, locks int, bug func(*ckSim)) (history.History, Options) {
	s := &ckSim{
		rng:     rand.New(rand.NewPCG(seed, 0xc4ec)),
		holders: map[string]ckSimGrant{},
		kv:      map[string]kvModelState{},

		unknownOneIn: 50,
	}
	if bug != nil {
		bug(s)
	}
	ms := int64(time.Millisecond)
	q := &ckSimQueue{}
	var live []string
	for i := 0; i < procs; i++ {
		p := &ckSimProc{id: fmt.Sprintf("p%d", i+1)}
		live = append(live, p.id)
		s.next(p, ckBase+int64(i)*ms/3)
		heap.Push(q, p)
	}
	names := make([]string, locks)
	for i := range names {
		names[i] = fmt.Sprintf("lock-%d", i)
	}
	// Faults are healed at 60% of the run; it goes on until every
	// process has been granted a lock since.
	var end, healedAt int64
	grantedSince := map[string]bool{}
	for len(s.h)+3*len(s.events) < n || len(grantedSince) < procs {
		p := heap.Pop(q).(*ckSimProc)
		if healedAt == 0 && len(s.h)+3*len(s.events) >= n*3/5 {
			healedAt = p.at
			s.h = append(s.h, history.Op{Process: "nemesis", Kind: history.OpFault, Fault: "all", Outcome: "healed", Invoke: healedAt, Complete: healedAt})
		}
		op := s.apply(p, names)
		// Completion: a while after taking effect; timed-out requests
		// report Unknown after the request timeout.
		op.Complete = p.at + int64(s.rng.IntN(3000))*int64(time.Microsecond)
		if op.Outcome == history.Unknown {
			op.Complete = op.Invoke + 200*ms
			op.Error = "context deadline exceeded"
		}
		if healedAt != 0 && op.Kind == history.OpAcquire && op.Outcome == history.OK && op.Complete >= healedAt {
			grantedSince[p.id] = true
		}
		s.h = append(s.h, op)
		end = max(end, op.Complete)
		s.next(p, op.Complete+int64(s.rng.IntN(2000))*int64(time.Microsecond))
		heap.Push(q, p)
	}
	t := end + ms
	for _, key := range names {
		r := history.Op{Process: history.FinalProcess, Kind: history.OpRead, Key: key, Invoke: t, Complete: t + ms/2}
		if st, ok := s.kv[key]; ok && st.exists {
			r.Outcome, r.Value, r.Version, r.Token = history.OK, st.value, st.version, st.token
		} else {
			r.Outcome = history.NotFound
		}
		s.h = append(s.h, r)
		t += ms
	}
	// Every node logs every committed event a little after it was
	// applied; n2 restarts two thirds of the way, between two entries,
	// and re-applies the last hundred events.
	for i, node := range ckNodes {
		for _, e := range s.events {
			e.Process = node
			e.Invoke += int64(i) * int64(time.Microsecond)
			e.Complete = e.Invoke
			s.h = append(s.h, e)
		}
	}
	k := len(s.events) * 2 / 3
	for k < len(s.events) && (s.events[k].Seq == s.events[k-1].Seq || s.events[k].Invoke == s.events[k-1].Invoke) {
		k++
	}
	j := k - 100 // re-applied from an entry's first event
	for j > 0 && s.events[j].Seq == s.events[j-1].Seq {
		j--
	}
	if j > 0 && k < len(s.events) {
		at := s.events[k-1].Invoke + int64(time.Microsecond) // after n2 logged k-1, before k
		for _, e := range s.events[j:k] {
			e.Process, e.Invoke, e.Complete = "n2", at, at
			s.h = append(s.h, e)
		}
	}
	return s.h.Sorted(), Options{HealedAt: healedAt, LiveProcesses: live}
}

// next decides p's next operation and when it takes effect.
func (s *ckSim) next(p *ckSimProc, invoke int64) {
	p.n++
	op := history.Op{Process: p.id, Invoke: invoke}
	switch {
	case p.grant.token == 0:
		op.Kind = history.OpAcquire
	case p.todo > 0 && s.rng.IntN(3) == 0:
		op.Kind, op.Key = history.OpRead, p.name
	case p.todo > 0:
		op.Kind, op.Key, op.Token, op.Value = history.OpWrite, p.name, p.grant.token, fmt.Sprintf("%s-%d", p.id, p.n)
		p.todo--
	default:
		op.Kind, op.Name, op.Session, op.Token = history.OpRelease, p.name, p.grant.session, p.grant.token
	}
	p.pending = op
	p.at = invoke + int64(100+s.rng.IntN(1500))*int64(time.Microsecond)
}

// apply lets p's pending operation take effect at p.at.
func (s *ckSim) apply(p *ckSimProc, names []string) history.Op {
	op := p.pending
	unknown := s.rng.IntN(s.unknownOneIn) == 0 // timed out: applied or not
	switch op.Kind {
	case history.OpAcquire:
		name := names[s.rng.IntN(len(names))]
		op.Name = name
		if unknown {
			op.Outcome = history.Unknown // and not applied
			return op
		}
		if _, held := s.holders[name]; held {
			op.Outcome, op.Error = history.Fail, "not granted"
			return op
		}
		s.sessions++
		s.grants++
		s.token++
		if s.resetTokens != 0 && s.grants == s.resetTokens {
			s.token = 1
		}
		g := ckSimGrant{session: s.sessions, token: s.token}
		s.holders[name] = g
		s.event(history.OpServerGrant, name, g, p.at)
		op.Outcome, op.Session, op.Token = history.OK, g.session, g.token
		p.grant, p.name, p.todo, p.zombie = g, name, 1+s.rng.IntN(4), false
	case history.OpRead:
		op.Outcome = history.OK
		if unknown {
			op.Outcome = history.Unknown
			return op
		}
		st, ok := s.kv[op.Key]
		if !ok || !st.exists {
			op.Outcome, op.Token = history.NotFound, st.token
			return op
		}
		op.Value, op.Version, op.Token = st.value, st.version, st.token
	case history.OpWrite:
		st := s.kv[op.Key]
		if op.Token < st.token && !s.unfenced {
			op.Outcome, op.Required = history.Stale, st.token
			if unknown {
				op.Outcome, op.Required = history.Unknown, 0
			}
			return op
		}
		if unknown && s.rng.IntN(2) == 0 {
			op.Outcome = history.Unknown // not applied
			return op
		}
		st = kvModelState{exists: true, value: op.Value, version: st.version + 1, token: max(st.token, op.Token)}
		s.kv[op.Key] = st
		op.Outcome, op.Version = history.OK, st.version
		if unknown {
			op.Outcome, op.Version = history.Unknown, 0 // applied
		}
	case history.OpRelease:
		op.Outcome, op.Result = history.OK, "already_released"
		if h, ok := s.holders[op.Name]; ok && h.session == op.Session {
			if !p.zombie && s.rng.IntN(8) == 0 {
				// Paused past its session's TTL: the session expires, and
				// the process, not knowing, writes once more later.
				delete(s.holders, op.Name)
				s.event(history.OpServerRelease, op.Name, h, p.at)
				s.event(history.OpServerExpire, "", h, p.at)
				s.events[len(s.events)-2].Result = "expired"
				s.events[len(s.events)-2].Seq = s.seq // same index as the expiry
				op.Kind, op.Outcome, op.Result = history.OpExpire, history.OK, ""
				p.zombie, p.todo = true, 1
				return op
			}
			delete(s.holders, op.Name)
			s.event(history.OpServerRelease, op.Name, h, p.at)
			op.Result = "released"
		}
		p.grant, p.zombie = ckSimGrant{}, false
	}
	return op
}

// event commits a server event at a new index.
func (s *ckSim) event(kind history.Kind, name string, g ckSimGrant, at int64) {
	s.seq++
	e := history.Op{Kind: kind, Name: name, Session: g.session, Token: g.token, Seq: s.seq, Invoke: at, Complete: at}
	switch kind {
	case history.OpServerRelease:
		e.Result = "released"
	case history.OpServerExpire:
		e.Name, e.Token = "", 0
	}
	s.events = append(s.events, e)
}

func TestCheckAll_simulated(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			h, o := ckSimulate(seed, 3000, 5, 3, nil)
			ckWant(t, All(h, o), "", "")
		})
	}
}

// TestCheckAll_simulatedBugs runs the checkers over simulated clusters
// with the bugs the harness's negative controls inject.
func TestCheckAll_simulatedBugs(t *testing.T) {
	tests := []struct {
		name string
		bug  func(*ckSim)
		want []string // checks that must report
	}{
		{"unfenced kv", func(s *ckSim) { s.unfenced = true }, []string{StaleWriteCheck, LinearizabilityCheck}},
		{"token reset", func(s *ckSim) { s.resetTokens = 50 }, []string{TokenOrderCheck}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, o := ckSimulate(7, 3000, 5, 3, tt.bug)
			if tt.name == "token reset" && !ckHasToken(h, 1, 2) {
				t.Fatal("the simulated counter was not reset")
			}
			got := All(h, o)
			seen := map[string]int{}
			for _, v := range got {
				seen[v.Check]++
			}
			for _, c := range tt.want {
				if seen[c] == 0 {
					t.Errorf("no %s violation; got %v", c, seen)
				}
			}
			for i, v := range got {
				if i < 6 {
					t.Logf("%s: %s", v.Check, v.Message)
				}
			}
		})
	}
}

// TestCheckAll_large checks that a history of about 20,000 operations is
// checked in seconds, not minutes: the linearizability search must stay
// close to linear on the histories the harness records. The bound is
// loose on purpose (slow machines, the race detector); the time is logged.
func TestCheckAll_large(t *testing.T) {
	if testing.Short() {
		t.Skip("large history")
	}
	tests := []struct {
		name         string
		unknownOneIn int
	}{
		{"few timeouts", 50},
		// A long partition: one request in eight times out, and each
		// may take effect until the end of the history.
		{"many timeouts", 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, o := ckSimulate(42, 20000, 10, 5, func(s *ckSim) { s.unknownOneIn = tt.unknownOneIn })
			start := time.Now()
			got := All(h, o)
			d := time.Since(start)
			t.Logf("All over %d operations: %v", len(h), d)
			ckWant(t, got, "", "")
			if d > 2*time.Minute {
				t.Errorf("All took %v", d)
			}
		})
	}
}

func BenchmarkCheckAll(b *testing.B) {
	h, o := ckSimulate(42, 20000, 10, 5, func(s *ckSim) { s.unknownOneIn = 8 })
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if got := All(h, o); len(got) != 0 {
			b.Fatalf("%d violations: %s", len(got), got[0].Message)
		}
	}
}

// ckHasToken reports whether some acquire in h was granted a token of
// tokens more than once.
func ckHasToken(h history.History, tokens ...uint64) bool {
	n := map[uint64]int{}
	for _, op := range h {
		if op.Kind == history.OpAcquire && op.Outcome == history.OK {
			n[op.Token]++
		}
	}
	for _, t := range tokens {
		if n[t] > 1 {
			return true
		}
	}
	return false
}
