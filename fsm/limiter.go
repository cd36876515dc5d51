package fsm

import (
	"fmt"
	"sort"

	fence "github.com/fenced-dev/fenced"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// The rate limiter. Every decision is a command, decided with the time it
// carries (the proposing leader's clock, Command.now_unix_ms) clamped so
// that it never goes backwards: the table keeps the newest time a limiter
// command applied and decides a command that carries an older one (a new
// leader whose clock is behind) at that newest time. A limiter issues no
// grant and binds to no session; permits are counted, not held, so
// nothing is given back. A take that cannot be granted now may be
// reserved for the earliest moment its permits are free (x/time/rate's
// Reserve): it is counted at that moment, and the server answers its call
// then. Those reserved takes are the limiter's FIFO queue: each is granted
// no earlier than the one before it, and at most spec.queue wait at once.

// Limiter algorithms.
const (
	FixedWindow   = "fixed_window"
	SlidingWindow = "sliding_window"
	TokenBucket   = "token_bucket"
)

// Limits of a limiter's configuration and of a take.
const (
	// MaxLimiterPermits bounds a limit (and so the permits of one take).
	MaxLimiterPermits = 1_000_000_000
	// MaxLimiterWindowMs bounds a window or refill period: 24h.
	MaxLimiterWindowMs = 24 * 60 * 60 * 1000
	// MaxLimiterSegments bounds a sliding window's segments.
	MaxLimiterSegments = 100
	// MaxLimiterQueue bounds a limiter's queue; the server's
	// --max-limiter-queue may set a lower one.
	MaxLimiterQueue = 10_000
	// MaxLimiterWaitMs bounds how long a take may wait: 1h.
	MaxLimiterWaitMs = 60 * 60 * 1000
	// maxLimiterTime bounds the times limiters decide at (Unix ms, about
	// the year 144,000): a command's time is clamped into 0..maxLimiterTime,
	// so no sum of a time, a window and a wait overflows.
	maxLimiterTime = 1 << 52
)

// LimiterSpec is a limiter's configuration (docs/limiter.md).
type LimiterSpec struct {
	// Algorithm is FixedWindow, SlidingWindow or TokenBucket.
	Algorithm string
	// Limit is the permits per window, or the bucket's capacity.
	Limit uint64
	// WindowMs is the window, or the bucket's refill period.
	WindowMs int64
	// Segments divides a sliding window (WindowMs a multiple of it).
	Segments uint32
	// Rate is the tokens a bucket refills per WindowMs.
	Rate uint64
	// Queue is how many takes may wait at once.
	Queue uint32
}

func specOf(p *statev1.LimiterSpec) LimiterSpec {
	return LimiterSpec{Algorithm: p.GetAlgorithm(), Limit: p.GetLimit(), WindowMs: p.GetWindowMs(), Segments: p.GetSegments(), Rate: p.GetRate(), Queue: p.GetQueue()}
}

// Proto returns the spec's wire form.
func (s LimiterSpec) Proto() *statev1.LimiterSpec {
	return &statev1.LimiterSpec{Algorithm: s.Algorithm, Limit: s.Limit, WindowMs: s.WindowMs, Segments: s.Segments, Rate: s.Rate, Queue: s.Queue}
}

// Validate returns why the spec is malformed, or nil.
func (s LimiterSpec) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: limiter %s: %s", fence.ErrInvalidArgument, s.Algorithm, fmt.Sprintf(format, args...))
	}
	switch s.Algorithm {
	case FixedWindow, SlidingWindow, TokenBucket:
	default:
		return fmt.Errorf("%w: limiter algorithm %q is none of %s, %s, %s", fence.ErrInvalidArgument, s.Algorithm, FixedWindow, SlidingWindow, TokenBucket)
	}
	switch {
	case s.Limit < 1 || s.Limit > MaxLimiterPermits:
		return bad("limit %d is out of range 1 to %d", s.Limit, MaxLimiterPermits)
	case s.WindowMs < 1 || s.WindowMs > MaxLimiterWindowMs:
		return bad("window %dms is out of range 1ms to %dms (24h)", s.WindowMs, MaxLimiterWindowMs)
	case s.Queue > MaxLimiterQueue:
		return bad("queue %d is above the limit %d", s.Queue, MaxLimiterQueue)
	}
	switch s.Algorithm {
	case SlidingWindow:
		if s.Segments < 1 || s.Segments > MaxLimiterSegments || s.WindowMs%int64(s.Segments) != 0 {
			return bad("segments %d must be 1 to %d and divide the window %dms", s.Segments, MaxLimiterSegments, s.WindowMs)
		}
	default:
		if s.Segments != 0 {
			return bad("segments %d: only a sliding window has segments", s.Segments)
		}
	}
	switch s.Algorithm {
	case TokenBucket:
		if s.Rate < 1 || s.Rate > MaxLimiterPermits {
			return bad("rate %d is out of range 1 to %d tokens per window", s.Rate, MaxLimiterPermits)
		}
	default:
		if s.Rate != 0 {
			return bad("rate %d: only a token bucket has a rate", s.Rate)
		}
	}
	return nil
}

type limiter struct {
	name string
	spec LimiterSpec
	// slots are the permits counted per window (fixed) or segment
	// (sliding) index; past ones are pruned.
	slots map[int64]uint64
	// level is the bucket's tokens × WindowMs at levelAt, which is in the
	// future while takes wait (the moment the last of them is granted).
	level, levelAt int64
	// pending are the times reserved takes are granted at, ascending.
	pending []int64
}

// LimiterResult is the outcome of a limiter command.
type LimiterResult struct {
	// Changed reports a Config that changed (or created) the limiter.
	Changed bool
	// Granted reports a take whose permits were counted; WaitMs is how
	// long after Now they are granted (0: at once).
	Granted bool
	WaitMs  int64
	// RetryAfterMs is when a take that was not granted may succeed.
	RetryAfterMs int64
	// Now is the time the command was decided at (clamped).
	Now int64
}

// LimiterInfo describes a limiter at a moment.
type LimiterInfo struct {
	Name string
	Spec LimiterSpec
	// Exists is false when no limiter has the name.
	Exists bool
	// Available is how many permits a take could have at Now.
	Available uint64
	// Waiting is how many reserved takes are not yet granted at Now.
	Waiting int
	// Now is the moment described: the time asked, or the newest time a
	// limiter command applied if that is later.
	Now int64
}

// limiterTable is every limiter by name, and the limiters' clock.
type limiterTable struct {
	byName map[string]*limiter
	clock  int64 // the newest time a limiter command was decided at
}

var _ section = (*limiterTable)(nil)

func newLimiterTable() *limiterTable { return &limiterTable{byName: make(map[string]*limiter)} }

// advance clamps a command's time so that it never goes backwards.
func (t *limiterTable) advance(now int64) int64 {
	t.clock = t.at(now)
	return t.clock
}

// at is the time a command carrying now is decided at: now clamped into
// range, and never before the newest time decided.
func (t *limiterTable) at(now int64) int64 {
	return max(t.clock, min(max(now, 0), maxLimiterTime))
}

func (l *limiter) unit() int64 { return l.spec.WindowMs }

func (l *limiter) slotLen() int64 {
	if l.spec.Algorithm == SlidingWindow {
		return l.spec.WindowMs / int64(l.spec.Segments)
	}
	return l.spec.WindowMs
}

// bucketLevel is the bucket's level at now; before levelAt it is the level at levelAt.
func (l *limiter) bucketLevel(now int64) int64 {
	capacity := int64(l.spec.Limit) * l.unit()
	if l.level >= capacity || now <= l.levelAt {
		return l.level
	}
	rate := int64(l.spec.Rate)
	fill := (capacity - l.level + rate - 1) / rate // ms until full
	if now-l.levelAt >= fill {
		return capacity
	}
	return l.level + (now-l.levelAt)*rate
}

// windowSum is the permits counted in the sliding window ending with
// segment j.
func (l *limiter) windowSum(j int64) uint64 {
	var sum uint64
	for i := j - int64(l.spec.Segments) + 1; i <= j; i++ {
		sum += l.slots[i]
	}
	return sum
}

// room is how many permits could be counted in slot k.
func (l *limiter) room(k int64) uint64 {
	if l.spec.Algorithm == FixedWindow {
		return l.spec.Limit - min(l.spec.Limit, l.slots[k])
	}
	var most uint64
	for j := k; j < k+int64(l.spec.Segments); j++ {
		most = max(most, l.windowSum(j))
	}
	return l.spec.Limit - min(l.spec.Limit, most)
}

// earliest is the first moment at or after from at which n permits can be
// counted, for a windowed limiter. Slots past from are only those of
// reserved takes, so the walk ends within their number plus a window.
func (l *limiter) earliest(n uint64, from int64) int64 {
	k := from / l.slotLen()
	for limit := k + int64(len(l.slots)+2)*int64(max(l.spec.Segments, 1)) + 2; k < limit; k++ {
		if l.room(k) >= n {
			break
		}
	}
	return max(from, k*l.slotLen())
}

func (l *limiter) prune(now int64) {
	for len(l.pending) > 0 && l.pending[0] <= now {
		l.pending = l.pending[1:]
	}
	if len(l.pending) == 0 {
		l.pending = nil
	}
	switch l.spec.Algorithm {
	case TokenBucket:
		if now > l.levelAt {
			l.level, l.levelAt = l.bucketLevel(now), now
		}
	default:
		keep := now/l.slotLen() - int64(max(l.spec.Segments, 1)) + 1 // the oldest slot a window at now counts
		for k := range l.slots {
			if k < keep {
				delete(l.slots, k)
			}
		}
	}
}

// busy reports whether permits are out: counted in a window that is not
// over, a bucket below full, or takes waiting.
// It changes nothing.
func (l *limiter) busy(now int64) bool {
	if len(l.pending) > 0 && l.pending[len(l.pending)-1] > now {
		return true
	}
	if l.spec.Algorithm == TokenBucket {
		return l.bucketLevel(now) < int64(l.spec.Limit)*l.unit()
	}
	keep := now/l.slotLen() - int64(max(l.spec.Segments, 1)) + 1
	for k := range l.slots {
		if k >= keep {
			return true
		}
	}
	return false
}

func (l *limiter) restart(now int64) {
	l.slots, l.pending = map[int64]uint64{}, nil
	l.level, l.levelAt = 0, now
	if l.spec.Algorithm == TokenBucket {
		l.level = int64(l.spec.Limit) * l.unit()
	}
}

func (t *limiterTable) config(c *statev1.LimiterConfig, now int64) Result {
	name, spec := c.GetName(), specOf(c.GetSpec())
	if err := fence.ValidateName(name); err != nil {
		return Result{Err: err}
	}
	if err := spec.Validate(); err != nil {
		return Result{Err: err}
	}
	now = t.at(now) // stored only once the config is taken
	l := t.byName[name]
	if l != nil {
		if l.spec == spec {
			return Result{Limiter: &LimiterResult{Now: now}}
		}
		if l.busy(now) && !c.GetReplace() {
			return Result{Err: fmt.Errorf("%w: limiter %q has permits out under its configuration (%s); a changed configuration applies when none are out, or with replace, which starts the limiter afresh", fence.ErrInvalidArgument, name, l.spec)}
		}
	} else {
		l = &limiter{name: name}
		t.byName[name] = l
	}
	t.advance(now)
	l.spec = spec
	l.restart(now)
	return Result{Limiter: &LimiterResult{Changed: true, Now: now}}
}

func (t *limiterTable) take(c *statev1.LimiterTake, now int64) Result {
	name, n, maxWait := c.GetName(), c.GetPermits(), c.GetMaxWaitMs()
	if err := fence.ValidateName(name); err != nil {
		return Result{Err: err}
	}
	l := t.byName[name]
	switch {
	case l == nil:
		return Result{Err: fmt.Errorf("%w: limiter %q is not configured", fence.ErrInvalidArgument, name)}
	case n < 1 || n > l.spec.Limit:
		return Result{Err: fmt.Errorf("%w: %d permits is out of range 1 to the limit %d of limiter %q", fence.ErrInvalidArgument, n, l.spec.Limit, name)}
	case maxWait < 0 || maxWait > MaxLimiterWaitMs:
		return Result{Err: fmt.Errorf("%w: max wait %dms is out of range 0 to %dms", fence.ErrInvalidArgument, maxWait, MaxLimiterWaitMs)}
	}
	now = t.advance(now)
	l.prune(now)
	from := now
	if len(l.pending) > 0 {
		from = l.pending[len(l.pending)-1] // first in, first granted
	}
	var at, levelThen int64
	if l.spec.Algorithm == TokenBucket {
		// The bucket's level is known up to levelAt (the moment the last
		// waiting take is granted); the take is granted when it holds n.
		need, base := int64(n)*l.unit(), max(now, l.levelAt)
		level := l.bucketLevel(base)
		at = base
		if level < need {
			rate := int64(l.spec.Rate)
			at = base + (need-level+rate-1)/rate
		}
		levelThen = l.bucketLevel(at) // capped at the capacity
		if at > base {
			levelThen = min(int64(l.spec.Limit)*l.unit(), level+(at-base)*int64(l.spec.Rate))
		}
	} else {
		at = l.earliest(n, from)
	}
	res := &LimiterResult{Now: now}
	switch {
	case at == now:
		res.Granted = true
	case int(l.spec.Queue) > len(l.pending) && at-now <= maxWait:
		res.Granted, res.WaitMs = true, at-now
		l.pending = append(l.pending, at)
	default:
		res.RetryAfterMs = at - now
		return Result{Limiter: res}
	}
	if l.spec.Algorithm == TokenBucket {
		l.level, l.levelAt = levelThen-int64(n)*l.unit(), at
	} else {
		l.slots[at/l.slotLen()] += n
	}
	return Result{Limiter: res}
}

// String describes the limiter's configuration, for messages.
func (s LimiterSpec) String() string {
	switch s.Algorithm {
	case TokenBucket:
		return fmt.Sprintf("%s capacity %d rate %d per %dms queue %d", s.Algorithm, s.Limit, s.Rate, s.WindowMs, s.Queue)
	case SlidingWindow:
		return fmt.Sprintf("%s limit %d per %dms in %d segments queue %d", s.Algorithm, s.Limit, s.WindowMs, s.Segments, s.Queue)
	}
	return fmt.Sprintf("%s limit %d per %dms queue %d", s.Algorithm, s.Limit, s.WindowMs, s.Queue)
}

// Limiter describes a limiter at now (or at the newest time a limiter
// command applied, if later). It changes nothing.
func (m *Machine) Limiter(name string, now int64) LimiterInfo {
	t := m.limiters
	now = t.at(now)
	l := t.byName[name]
	if l == nil {
		return LimiterInfo{Name: name, Now: now}
	}
	info := LimiterInfo{Name: name, Spec: l.spec, Exists: true, Now: now}
	for _, p := range l.pending {
		if p > now {
			info.Waiting++
		}
	}
	switch {
	case info.Waiting > 0:
	case l.spec.Algorithm == TokenBucket:
		info.Available = uint64(l.bucketLevel(now) / l.unit())
	default:
		info.Available = l.room(now / l.slotLen())
	}
	return info
}

// LimiterCount returns the number of limiters.
func (m *Machine) LimiterCount() int { return len(m.limiters.byName) }

// snapshot implements section.
func (t *limiterTable) snapshot(st *statev1.State) {
	st.LimiterClockUnixMs = t.clock
	for _, name := range sortedKeys(t.byName) {
		l := t.byName[name]
		pl := &statev1.Limiter{Name: name, Spec: l.spec.Proto(), Level: l.level, LevelAtUnixMs: l.levelAt, Pending: l.pending}
		keys := make([]int64, 0, len(l.slots))
		for k := range l.slots {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
		for _, k := range keys {
			pl.Slots = append(pl.Slots, &statev1.LimiterSlot{Index: k, Used: l.slots[k]})
		}
		st.Limiters = append(st.Limiters, pl)
	}
}

// restore implements section. A limiter no sequence of commands could
// reach is refused.
func (t *limiterTable) restore(st *statev1.State) error {
	t.clock = st.GetLimiterClockUnixMs()
	if t.clock < 0 || t.clock > maxLimiterTime {
		return broken("the limiters' clock %d is out of range 0 to %d", t.clock, int64(maxLimiterTime))
	}
	// Reservations lie at most a queue of waits ahead of the clock.
	horizon := t.clock + (MaxLimiterQueue+1)*MaxLimiterWaitMs
	for _, pl := range st.GetLimiters() {
		l := &limiter{name: pl.GetName(), spec: specOf(pl.GetSpec()), slots: map[int64]uint64{}, level: pl.GetLevel(), levelAt: pl.GetLevelAtUnixMs()}
		switch {
		case storedName(l.name) != nil:
			return broken("limiter name %q: %v", l.name, storedName(l.name))
		case t.byName[l.name] != nil:
			return broken("the snapshot lists limiter %q twice", l.name)
		case l.spec.Validate() != nil:
			return broken("limiter %q: %v", l.name, l.spec.Validate())
		case len(pl.GetPending()) > int(l.spec.Queue):
			return broken("limiter %q has %d takes waiting, more than its queue %d", l.name, len(pl.GetPending()), l.spec.Queue)
		case l.spec.Algorithm == TokenBucket && (l.level < 0 || l.level > int64(l.spec.Limit)*l.unit() || len(pl.GetSlots()) > 0):
			return broken("limiter %q: bucket level %d above its capacity, or windows listed", l.name, l.level)
		case l.spec.Algorithm != TokenBucket && l.level != 0:
			return broken("limiter %q: a windowed limiter with a bucket level", l.name)
		case l.levelAt < 0 || l.levelAt > horizon:
			return broken("limiter %q: bucket time %d out of range", l.name, l.levelAt)
		}
		for i, p := range pl.GetPending() {
			if p < 0 || p > horizon || i > 0 && p < pl.GetPending()[i-1] {
				return broken("limiter %q: waiting takes out of order", l.name)
			}
			l.pending = append(l.pending, p)
		}
		for i, s := range pl.GetSlots() {
			if s.GetIndex() < 0 || s.GetIndex() > horizon/l.slotLen() || i > 0 && s.GetIndex() <= pl.GetSlots()[i-1].GetIndex() || s.GetUsed() == 0 || s.GetUsed() > l.spec.Limit {
				return broken("limiter %q: window %d listed out of order or with %d permits (limit %d)", l.name, s.GetIndex(), s.GetUsed(), l.spec.Limit)
			}
			l.slots[s.GetIndex()] = s.GetUsed()
		}
		t.byName[l.name] = l
	}
	return nil
}
