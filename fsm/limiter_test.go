package fsm_test

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

func limiterConfig(name string, s fsm.LimiterSpec, replace bool) *statev1.Command {
	return &statev1.Command{Op: &statev1.Command_LimiterConfig{LimiterConfig: &statev1.LimiterConfig{Name: name, Spec: s.Proto(), Replace: replace}}}
}

func limiterTake(name string, n uint64, maxWait, now int64) *statev1.Command {
	return &statev1.Command{NowUnixMs: now, Op: &statev1.Command_LimiterTake{LimiterTake: &statev1.LimiterTake{Name: name, Permits: n, MaxWaitMs: maxWait}}}
}

func drawSpec(t *rapid.T) fsm.LimiterSpec {
	s := fsm.LimiterSpec{
		Algorithm: rapid.SampledFrom([]string{fsm.FixedWindow, fsm.SlidingWindow, fsm.TokenBucket}).Draw(t, "algorithm"),
		Limit:     rapid.Uint64Range(1, 6).Draw(t, "limit"),
		Queue:     uint32(rapid.IntRange(0, 3).Draw(t, "queue")),
	}
	switch s.Algorithm {
	case fsm.FixedWindow:
		s.WindowMs = rapid.Int64Range(1, 50).Draw(t, "window")
	case fsm.SlidingWindow:
		s.Segments = uint32(rapid.IntRange(1, 5).Draw(t, "segments"))
		s.WindowMs = int64(s.Segments) * rapid.Int64Range(1, 10).Draw(t, "segment")
	case fsm.TokenBucket:
		s.WindowMs = rapid.Int64Range(1, 50).Draw(t, "window")
		s.Rate = rapid.Uint64Range(1, 4).Draw(t, "rate")
	}
	return s
}

type permitGrant struct {
	at int64 // when the permits count: decided at, plus the wait
	n  uint64
}

// TestLimiterNeverOverLimit takes random permits at random times — time
// mostly moving on, sometimes jumping backwards as a new leader's clock
// may — and checks over every grant that the limiter never granted more
// than its limit in any window: every aligned window (fixed), every run of
// segments as long as the window (sliding), every interval [a, b] of a
// bucket (capacity + rate × (b−a) / window). It also checks that time
// never goes backwards in the decisions, that waiting takes are granted in
// arrival order, and that no more than the queue wait at once.
func TestLimiterNeverOverLimit(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := newMachineR(t)
		spec := drawSpec(t)
		if res := m.Apply(limiterConfig("api", spec, false)); res.Err != nil {
			t.Fatalf("config %v: %v", spec, res.Err)
		}
		var grants []permitGrant
		now, decided, lastWaitAt := int64(1000), int64(0), int64(0)
		var pending []int64
		for i := range rapid.IntRange(1, 80).Draw(t, "steps") {
			if rapid.IntRange(0, 9).Draw(t, "backwards") == 0 {
				now -= rapid.Int64Range(0, 100).Draw(t, "back") // a new leader whose clock is behind
			} else {
				now += rapid.Int64Range(0, 15).Draw(t, "step")
			}
			n := rapid.Uint64Range(1, spec.Limit).Draw(t, "n")
			wait := rapid.Int64Range(0, 200).Draw(t, "maxwait")
			res := m.Apply(limiterTake("api", n, wait, now))
			if res.Err != nil {
				t.Fatalf("step %d: take: %v", i, res.Err)
			}
			r := res.Limiter
			if r.Now < decided || r.Now < now {
				t.Fatalf("step %d: decided at %d, before %d (the newest) or the command's %d", i, r.Now, decided, now)
			}
			decided = r.Now
			for len(pending) > 0 && pending[0] <= r.Now {
				pending = pending[1:]
			}
			switch {
			case r.Granted && r.WaitMs > 0:
				at := r.Now + r.WaitMs
				if r.WaitMs > wait || at < lastWaitAt {
					t.Fatalf("step %d: waited %dms (max %d) until %d, before an earlier waiter's %d", i, r.WaitMs, wait, at, lastWaitAt)
				}
				lastWaitAt = at
				pending = append(pending, at)
				if len(pending) > int(spec.Queue) {
					t.Fatalf("step %d: %d takes waiting, queue %d", i, len(pending), spec.Queue)
				}
				grants = append(grants, permitGrant{at, n})
			case r.Granted:
				if len(pending) > 0 {
					t.Fatalf("step %d: granted at once while %d takes wait (not FIFO)", i, len(pending))
				}
				grants = append(grants, permitGrant{r.Now, n})
			default:
				if r.RetryAfterMs <= 0 {
					t.Fatalf("step %d: refused with retry-after %dms", i, r.RetryAfterMs)
				}
			}
		}
		checkWindows(t, spec, grants)
	})
}

func checkWindows(t *rapid.T, spec fsm.LimiterSpec, grants []permitGrant) {
	switch spec.Algorithm {
	case fsm.FixedWindow, fsm.SlidingWindow:
		seg := spec.WindowMs
		span := int64(1)
		if spec.Algorithm == fsm.SlidingWindow {
			seg, span = spec.WindowMs/int64(spec.Segments), int64(spec.Segments)
		}
		used := map[int64]uint64{}
		for _, g := range grants {
			used[g.at/seg] += g.n
		}
		for j := range used {
			for end := j; end < j+span; end++ {
				var sum uint64
				for i := end - span + 1; i <= end; i++ {
					sum += used[i]
				}
				if sum > spec.Limit {
					t.Fatalf("%v: %d permits granted in the window of slots %d..%d (limit %d); grants %v", spec, sum, end-span+1, end, spec.Limit, grants)
				}
			}
		}
	case fsm.TokenBucket:
		for _, a := range grants {
			for _, b := range grants {
				if b.at < a.at {
					continue
				}
				var sum uint64
				for _, g := range grants {
					if g.at >= a.at && g.at <= b.at {
						sum += g.n
					}
				}
				if int64(sum)*spec.WindowMs > int64(spec.Limit)*spec.WindowMs+int64(spec.Rate)*(b.at-a.at) {
					t.Fatalf("%v: %d permits granted in [%d, %d] (capacity %d, rate %d per %dms); grants %v", spec, sum, a.at, b.at, spec.Limit, spec.Rate, spec.WindowMs, grants)
				}
			}
		}
	}
}

func newMachineR(t *rapid.T) *fsm.Machine {
	m := fsm.New(nil)
	if res := m.Apply(initCommand(0)); res.Err != nil {
		t.Fatalf("init: %v", res.Err)
	}
	return m
}

// TestLimiterConfigChange: an equal configuration is a no-op; a changed one
// is refused while permits are out and changes nothing, taken once none
// are, and taken with replace at any time.
func TestLimiterConfigChange(t *testing.T) {
	m := newMachine(t)
	a := fsm.LimiterSpec{Algorithm: fsm.FixedWindow, Limit: 2, WindowMs: 1000}
	b := fsm.LimiterSpec{Algorithm: fsm.FixedWindow, Limit: 5, WindowMs: 1000}
	if res := m.Apply(limiterConfig("api", a, false)); res.Err != nil || !res.Limiter.Changed {
		t.Fatalf("create: %+v", res)
	}
	if res := m.Apply(limiterConfig("api", a, false)); res.Err != nil || res.Limiter.Changed {
		t.Fatalf("same config again: %+v", res)
	}
	if res := m.Apply(limiterTake("api", 1, 0, 10_500)); res.Err != nil || !res.Limiter.Granted {
		t.Fatalf("take: %+v", res)
	}
	before := mustSnapshot(t, m)
	res := m.Apply(&statev1.Command{NowUnixMs: 10_600, Op: &statev1.Command_LimiterConfig{LimiterConfig: &statev1.LimiterConfig{Name: "api", Spec: b.Proto()}}})
	if !errors.Is(res.Err, fence.ErrInvalidArgument) || !strings.Contains(res.Err.Error(), "permits out") {
		t.Fatalf("change with permits out: %v", res.Err)
	}
	if !bytes.Equal(before, mustSnapshot(t, m)) {
		t.Fatal("a refused change changed the state")
	}
	// The window of the take ends at 11000: then no permits are out.
	if res := m.Apply(&statev1.Command{NowUnixMs: 11_000, Op: &statev1.Command_LimiterConfig{LimiterConfig: &statev1.LimiterConfig{Name: "api", Spec: b.Proto()}}}); res.Err != nil || !res.Limiter.Changed {
		t.Fatalf("change with none out: %+v", res)
	}
	m.Apply(limiterTake("api", 5, 0, 11_001))
	if res := m.Apply(&statev1.Command{NowUnixMs: 11_002, Op: &statev1.Command_LimiterConfig{LimiterConfig: &statev1.LimiterConfig{Name: "api", Spec: a.Proto(), Replace: true}}}); res.Err != nil || !res.Limiter.Changed {
		t.Fatalf("replace: %+v", res)
	}
	if info := m.Limiter("api", 11_002); info.Spec != a || info.Available != 2 {
		t.Fatalf("after replace: %+v", info)
	}
}

// TestLimiterBadInput: malformed configurations and takes are refused
// with a clear error and change nothing.
func TestLimiterBadInput(t *testing.T) {
	m := newMachine(t)
	good := fsm.LimiterSpec{Algorithm: fsm.TokenBucket, Limit: 10, WindowMs: 1000, Rate: 5, Queue: 2}
	if res := m.Apply(limiterConfig("api", good, false)); res.Err != nil {
		t.Fatal(res.Err)
	}
	m.Apply(limiterTake("api", 3, 0, 5000))
	with := func(f func(*fsm.LimiterSpec)) fsm.LimiterSpec { s := good; f(&s); return s }
	for _, c := range []struct {
		cmd  *statev1.Command
		want string
	}{
		{limiterConfig("x", with(func(s *fsm.LimiterSpec) { s.Algorithm = "leaky" }), false), "none of"},
		{limiterConfig("x", with(func(s *fsm.LimiterSpec) { s.Limit = 0 }), false), "limit 0"},
		{limiterConfig("x", with(func(s *fsm.LimiterSpec) { s.Limit = fsm.MaxLimiterPermits + 1 }), false), "out of range"},
		{limiterConfig("x", with(func(s *fsm.LimiterSpec) { s.WindowMs = 0 }), false), "window 0ms"},
		{limiterConfig("x", with(func(s *fsm.LimiterSpec) { s.Rate = 0 }), false), "rate 0"},
		{limiterConfig("x", with(func(s *fsm.LimiterSpec) { s.Segments = 3 }), false), "only a sliding window"},
		{limiterConfig("x", with(func(s *fsm.LimiterSpec) { s.Queue = fsm.MaxLimiterQueue + 1 }), false), "queue"},
		{limiterConfig("x", fsm.LimiterSpec{Algorithm: fsm.SlidingWindow, Limit: 1, WindowMs: 1000, Segments: 7}, false), "divide"},
		{limiterConfig("x", fsm.LimiterSpec{Algorithm: fsm.FixedWindow, Limit: 1, WindowMs: 1000, Rate: 2}, false), "only a token bucket"},
		{limiterConfig("api", with(func(s *fsm.LimiterSpec) { s.Rate = 6 }), false), "permits out"},
		{limiterTake("nope", 1, 0, 5001), "not configured"},
		{limiterTake("api", 0, 0, 5001), "out of range"},
		{limiterTake("api", 11, 0, 5001), "out of range"},
		{limiterTake("api", 1, -1, 5001), "max wait"},
		{limiterTake("api", 1, fsm.MaxLimiterWaitMs+1, 5001), "max wait"},
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

// TestLatchLimiterSnapshotReplay applies random latch and limiter
// commands, snapshots at a random point, restores the snapshot into a
// second machine, and applies the rest to both: every result and the
// final state must be identical.
func TestLatchLimiterSnapshotReplay(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var cmds []*statev1.Command
		now := int64(5000)
		for range rapid.IntRange(1, 60).Draw(t, "n") {
			name := rapid.SampledFrom([]string{"a", "b"}).Draw(t, "name")
			now += rapid.Int64Range(-20, 30).Draw(t, "dt")
			var c *statev1.Command
			switch rapid.IntRange(0, 4).Draw(t, "op") {
			case 0:
				c = latchCreate(name, rapid.Uint64Range(0, 3).Draw(t, "count"))
			case 1:
				c = latchCountDown(name, rapid.Uint64Range(1, 3).Draw(t, "gen"), rapid.SampledFrom([]string{"", "x", "y"}).Draw(t, "id"))
			case 2:
				c = limiterConfig(name, drawSpec(t), rapid.Bool().Draw(t, "replace"))
			default:
				c = limiterTake(name, rapid.Uint64Range(1, 3).Draw(t, "permits"), rapid.Int64Range(0, 100).Draw(t, "wait"), 0)
			}
			c.NowUnixMs = now
			cmds = append(cmds, c)
		}
		cut := rapid.IntRange(0, len(cmds)).Draw(t, "cut")
		a := newMachineR(t)
		for _, c := range cmds[:cut] {
			a.Apply(c)
		}
		b := fsm.New(nil)
		if err := b.Restore(mustSnapshot(t, a)); err != nil {
			t.Fatalf("restore: %v", err)
		}
		for i, c := range cmds[cut:] {
			ra, rb := a.Apply(c), b.Apply(c)
			if fmt_(ra) != fmt_(rb) {
				t.Fatalf("command %d after the cut: %s on the original, %s on the restored", i, fmt_(ra), fmt_(rb))
			}
		}
		if !bytes.Equal(mustSnapshot(t, a), mustSnapshot(t, b)) {
			t.Fatal("the restored machine's state differs after the replay")
		}
	})
}

func fmt_(r fsm.Result) string {
	s := ""
	if r.Err != nil {
		s = r.Err.Error()
	}
	if r.Latch != nil {
		s += " " + r.Latch.CountDown.String() + " " + strconvU(r.Latch.Latch.Generation) + "/" + strconvU(r.Latch.Latch.Count)
	}
	if r.Limiter != nil {
		l := r.Limiter
		s += " " + strconvU(uint64(l.Now)) + " " + strconvU(uint64(l.WaitMs)) + " " + strconvU(uint64(l.RetryAfterMs))
		if l.Granted {
			s += " granted"
		}
		if l.Changed {
			s += " changed"
		}
	}
	return s
}

func strconvU(v uint64) string { return strconv.FormatUint(v, 10) }
