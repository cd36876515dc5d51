package fsm_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

func latchCreate(name string, count uint64) *statev1.Command {
	return &statev1.Command{Op: &statev1.Command_LatchCreate{LatchCreate: &statev1.LatchCreate{Name: name, Count: count}}}
}

func latchCountDown(name string, gen uint64, id string) *statev1.Command {
	return &statev1.Command{Op: &statev1.Command_LatchCountDown{LatchCountDown: &statev1.LatchCountDown{Name: name, Generation: gen, RequestId: id}}}
}

// latchEvents records LatchEnded calls.
type latchEvents struct {
	fsm.NopObserver
	ended []latchEnd
}

type latchEnd struct {
	name       string
	generation uint64
	completed  bool
}

func (e *latchEvents) LatchEnded(name string, generation uint64, completed bool) {
	e.ended = append(e.ended, latchEnd{name, generation, completed})
}

// TestLatchProperty drives latches with random creates (resets) and
// count-downs to random generations, retried request ids included, and
// checks every result and every pushed end against a model: a generation
// completes exactly when its own count reaches zero, once; a count-down to
// an old generation is rejected and one to a completed generation is a
// no-op, both reported and neither changing anything; a waiter of a
// generation that a reset replaced before zero is told it was replaced,
// and no waiter is left unanswered on a generation that ended.
func TestLatchProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ev := &latchEvents{}
		m := fsm.New(ev)
		type model struct {
			gen, count uint64
			ids        map[string]bool
			creator    string
		}
		models := map[string]*model{}
		waiters := map[latchEnd]bool{} // (name, generation) -> waiting (completed unused)
		names := []string{"a", "b"}
		for i := range rapid.IntRange(1, 60).Draw(t, "steps") {
			name := rapid.SampledFrom(names).Draw(t, "name")
			md := models[name]
			before := mustSnapshot(t, m)
			ev.ended = nil
			switch op := rapid.IntRange(0, 9).Draw(t, "op"); {
			case op < 2 || md == nil:
				count := rapid.Uint64Range(0, 4).Draw(t, "count")
				id := rapid.SampledFrom([]string{"", "c1", "c2"}).Draw(t, "createid")
				c := latchCreate(name, count)
				c.GetLatchCreate().RequestId = id
				res := m.Apply(c)
				if res.Err != nil {
					t.Fatalf("step %d: create: %v", i, res.Err)
				}
				if md != nil && id != "" && md.creator == id {
					// A retried create answers the generation it started.
					if res.Latch.Latch.Generation != md.gen || res.Latch.Latch.Count != md.count || !bytes.Equal(before, mustSnapshot(t, m)) {
						t.Fatalf("step %d: a retried create (%q) gave %+v and changed the state; want generation %d unchanged", i, id, res.Latch, md.gen)
					}
					checkEnds(t, i, ev.ended, nil)
					break
				}
				var want []latchEnd
				if md != nil && md.count > 0 {
					want = append(want, latchEnd{name, md.gen, false})
				}
				if md == nil {
					md = &model{}
					models[name] = md
				}
				if res.Latch.Replaced != md.gen {
					t.Fatalf("step %d: create replaced %d, want %d", i, res.Latch.Replaced, md.gen)
				}
				md.gen, md.count, md.ids, md.creator = md.gen+1, count, map[string]bool{}, id
				if count == 0 {
					want = append(want, latchEnd{name, md.gen, true})
				}
				checkEnds(t, i, ev.ended, want)
			case op < 4:
				// A waiter registers on some generation (the server's wait).
				gen := rapid.Uint64Range(1, md.gen).Draw(t, "waitgen")
				if gen == md.gen && md.count > 0 {
					waiters[latchEnd{name: name, generation: gen}] = true
				}
				continue
			default:
				gen := rapid.Uint64Range(1, md.gen).Draw(t, "gen")
				id := rapid.SampledFrom([]string{"", "w1", "w2", "w3"}).Draw(t, "id")
				res := m.Apply(latchCountDown(name, gen, id))
				if res.Err != nil {
					t.Fatalf("step %d: count-down: %v", i, res.Err)
				}
				var want fsm.CountDownResult
				var ends []latchEnd
				switch {
				case gen < md.gen:
					want = fsm.StaleGeneration
				case id != "" && md.ids[id]:
					want = fsm.Duplicate
				case md.count == 0:
					want = fsm.AlreadyComplete
				default:
					md.count--
					if id != "" {
						md.ids[id] = true
					}
					want = fsm.Counted
					if md.count == 0 {
						want = fsm.Completed
						ends = append(ends, latchEnd{name, gen, true})
					}
				}
				if res.Latch.CountDown != want {
					t.Fatalf("step %d: count-down of %q generation %d (current %d, count %d) = %s, want %s", i, name, gen, md.gen, md.count, res.Latch.CountDown, want)
				}
				if want != fsm.Counted && want != fsm.Completed && !bytes.Equal(before, mustSnapshot(t, m)) {
					t.Fatalf("step %d: a %s count-down changed the state", i, want)
				}
				checkEnds(t, i, ev.ended, ends)
			}
			for _, e := range ev.ended {
				k := latchEnd{name: e.name, generation: e.generation}
				delete(waiters, k)
			}
			if info := m.Latch(name); info.Generation != md.gen || info.Count != md.count {
				t.Fatalf("step %d: latch %q is generation %d count %d, want %d %d", i, name, info.Generation, info.Count, md.gen, md.count)
			}
			for w := range waiters {
				if md := models[w.name]; w.generation != md.gen || md.count == 0 {
					t.Fatalf("step %d: waiter of %q generation %d left waiting (current %d, count %d)", i, w.name, w.generation, md.gen, md.count)
				}
			}
		}
	})
}

func checkEnds(t *rapid.T, step int, got, want []latchEnd) {
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("step %d: latch ends pushed %v, want %v", step, got, want)
	}
}

// TestLatchBadInput: every refused latch command names the problem and
// leaves the state byte for byte as it was.
func TestLatchBadInput(t *testing.T) {
	m := newMachine(t)
	if res := m.Apply(latchCreate("job", 2)); res.Err != nil {
		t.Fatal(res.Err)
	}
	for _, c := range []struct {
		cmd  *statev1.Command
		want string
	}{
		{latchCreate("job", fsm.MaxLatchCount+1), "above the limit"},
		{latchCreate("", 1), "name"},
		{latchCountDown("nope", 1, ""), "does not exist"},
		{latchCountDown("job", 0, ""), "no generation 0"},
		{latchCountDown("job", 2, ""), "no generation 2"},
		{latchCountDown("job", 1, string(make([]byte, 129))), "request id"},
	} {
		before := mustSnapshot(t, m)
		res := m.Apply(c.cmd)
		if res.Err == nil || !errors.Is(res.Err, fence.ErrInvalidArgument) || !strings.Contains(res.Err.Error(), c.want) {
			t.Errorf("%v: err %v, want invalid argument with %q", c.cmd, res.Err, c.want)
		}
		if !bytes.Equal(before, mustSnapshot(t, m)) {
			t.Errorf("%v changed the state", c.cmd)
		}
	}
}

// TestRestored_KeepsLatchesAndLimiters: a restore into a new issuer epoch
// keeps the latches (generation, count, count-down ids) and the limiters
// (configuration, permits counted, clock): the restored cluster grants no
// permit the old one had counted, and a retried count-down still counts
// once.
func TestRestored_KeepsLatchesAndLimiters(t *testing.T) {
	old := newMachine(t)
	old.Apply(latchCreate("job", 3))
	old.Apply(latchCountDown("job", 1, "w1"))
	spec := fsm.LimiterSpec{Algorithm: fsm.TokenBucket, Limit: 2, Rate: 1, WindowMs: 3_600_000}
	old.Apply(limiterConfig("api", spec, false))
	if res := old.Apply(limiterTake("api", 2, 0, 10_000)); !res.Limiter.Granted {
		t.Fatalf("take: %+v", res.Limiter)
	}
	out, _, err := fsm.Restored(mustSnapshot(t, old), fsm.Reissue{Floor: old.LastToken() + 10})
	if err != nil {
		t.Fatal(err)
	}
	m := fsm.New(nil)
	if err := m.Restore(out); err != nil {
		t.Fatal(err)
	}
	if l := m.Latch("job"); l.Generation != 1 || l.Count != 2 {
		t.Fatalf("latch after the restore: %+v", l)
	}
	if res := m.Apply(latchCountDown("job", 1, "w1")); res.Latch.CountDown != fsm.Duplicate {
		t.Fatalf("a retried count-down after the restore: %s, want duplicate", res.Latch.CountDown)
	}
	// A clock behind the old cluster's: decided at the old clock, nothing free.
	if res := m.Apply(limiterTake("api", 1, 0, 5_000)); res.Limiter.Granted || res.Limiter.Now != 10_000 {
		t.Fatalf("take after the restore: %+v; want refused, decided at 10000", res.Limiter)
	}
}
