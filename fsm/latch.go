package fsm

import (
	"fmt"

	fence "github.com/fenced-dev/fenced"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// The countdown latch. A latch has a generation and a count: Create starts
// a new generation with a count (creating the latch, or replacing its
// generation: reset), CountDown decrements the count of one generation,
// and the generation completes when its count reaches zero. A latch issues
// no grant and binds to no session: it is one snapshot section, and its
// waits live in the server, woken by LatchObserver.

// MaxLatchCount is the largest count a latch generation can start with;
// the server's --max-latch-count may set a lower one. A generation
// remembers the request id of each count-down, so the count bounds what a
// latch holds.
const MaxLatchCount = 1_000_000

// maxLatchRequestID bounds a count-down's request id.
const maxLatchRequestID = 128

// CountDownResult is what a count-down did.
type CountDownResult int

// Count-down outcomes.
const (
	// Counted means the count went down by one and is still above zero.
	Counted CountDownResult = iota + 1
	// Completed means this count-down brought the count to zero.
	Completed
	// AlreadyComplete means the generation was at zero already: a no-op.
	AlreadyComplete
	// StaleGeneration means the generation counted down was replaced:
	// rejected, nothing changed.
	StaleGeneration
	// Duplicate means the count-down's request id already counted this
	// generation down: a retry, nothing changed.
	Duplicate
)

// String returns the wire name of the outcome.
func (r CountDownResult) String() string {
	switch r {
	case Counted:
		return "counted"
	case Completed:
		return "completed"
	case AlreadyComplete:
		return "already_complete"
	case StaleGeneration:
		return "stale_generation"
	case Duplicate:
		return "duplicate"
	}
	return "unknown"
}

// LatchObserver is told when a latch generation ends: it completed (its
// count reached zero) or a reset replaced it. An Observer that also
// implements LatchObserver gets these calls, inside Apply, on every
// replica; like Observer's they must not block.
type LatchObserver interface {
	LatchEnded(name string, generation uint64, completed bool)
}

// LatchInfo describes a latch's current generation.
type LatchInfo struct {
	Name string
	// Generation is 0 when the latch does not exist.
	Generation uint64
	Count      uint64
	Initial    uint64
	CreatedAt  int64
}

// Exists reports whether the latch exists.
func (i LatchInfo) Exists() bool { return i.Generation != 0 }

// LatchResult is the outcome of a latch command.
type LatchResult struct {
	// Latch is the latch after the command.
	Latch LatchInfo
	// Replaced is the generation a Create replaced (0 for a new latch).
	Replaced uint64
	// CountDown is what a CountDown did.
	CountDown CountDownResult
}

type latch struct {
	name       string
	generation uint64
	count      uint64
	initial    uint64
	createdAt  int64
	createdBy  string          // request id of the create that started this generation
	counted    map[string]bool // request ids that counted this generation down
	order      []string        // the same ids in the order applied (snapshot)
}

func (l *latch) info() LatchInfo {
	return LatchInfo{Name: l.name, Generation: l.generation, Count: l.count, Initial: l.initial, CreatedAt: l.createdAt}
}

// latchTable is every latch by name.
type latchTable struct {
	m      *Machine
	byName map[string]*latch
}

var _ section = (*latchTable)(nil)

func newLatchTable(m *Machine) *latchTable {
	return &latchTable{m: m, byName: make(map[string]*latch)}
}

func (t *latchTable) ended(name string, generation uint64, completed bool) {
	if o, ok := t.m.obs.(LatchObserver); ok {
		o.LatchEnded(name, generation, completed)
	}
}

func validateLatchCount(count uint64) error {
	if count > MaxLatchCount {
		return fmt.Errorf("%w: latch count %d is above the limit %d", fence.ErrInvalidArgument, count, MaxLatchCount)
	}
	return nil
}

func (t *latchTable) create(c *statev1.LatchCreate, now int64) Result {
	name, count, id := c.GetName(), c.GetCount(), c.GetRequestId()
	if err := fence.ValidateName(name); err != nil {
		return Result{Err: err}
	}
	if err := validateLatchCount(count); err != nil {
		return Result{Err: err}
	}
	if len(id) > maxLatchRequestID {
		return Result{Err: fmt.Errorf("%w: request id is %d bytes, longer than %d", fence.ErrInvalidArgument, len(id), maxLatchRequestID)}
	}
	l := t.byName[name]
	if l != nil && id != "" && l.createdBy == id {
		// A retry of the create that started the current generation.
		return Result{Latch: &LatchResult{Latch: l.info(), Replaced: l.generation - 1}}
	}
	var replaced uint64
	wasOpen := false
	if l == nil {
		l = &latch{name: name}
		t.byName[name] = l
	} else {
		replaced, wasOpen = l.generation, l.count > 0
	}
	l.generation++
	l.count, l.initial, l.createdAt, l.createdBy = count, count, now, id
	l.counted, l.order = nil, nil
	if wasOpen { // a completed generation's waiters were answered already
		t.ended(name, replaced, false)
	}
	if count == 0 {
		t.ended(name, l.generation, true)
	}
	return Result{Latch: &LatchResult{Latch: l.info(), Replaced: replaced}}
}

func (t *latchTable) countDown(c *statev1.LatchCountDown) Result {
	name, gen, id := c.GetName(), c.GetGeneration(), c.GetRequestId()
	if err := fence.ValidateName(name); err != nil {
		return Result{Err: err}
	}
	if len(id) > maxLatchRequestID {
		return Result{Err: fmt.Errorf("%w: request id is %d bytes, longer than %d", fence.ErrInvalidArgument, len(id), maxLatchRequestID)}
	}
	l := t.byName[name]
	switch {
	case l == nil:
		return Result{Err: fmt.Errorf("%w: latch %q does not exist; create it first", fence.ErrInvalidArgument, name)}
	case gen == 0 || gen > l.generation:
		return Result{Err: fmt.Errorf("%w: latch %q has no generation %d (its current generation is %d)", fence.ErrInvalidArgument, name, gen, l.generation)}
	}
	res := &LatchResult{Latch: l.info()}
	switch {
	case gen < l.generation:
		res.CountDown = StaleGeneration
	case id != "" && l.counted[id]:
		res.CountDown = Duplicate
	case l.count == 0:
		res.CountDown = AlreadyComplete
	default:
		l.count--
		if id != "" {
			if l.counted == nil {
				l.counted = make(map[string]bool)
			}
			l.counted[id] = true
			l.order = append(l.order, id)
		}
		res.Latch = l.info()
		res.CountDown = Counted
		if l.count == 1 && t.m.faults.earlyLatch() {
			t.ended(name, gen, true) // the latch-early test fault (faults_on.go)
		}
		if l.count == 0 {
			res.CountDown = Completed
			t.ended(name, gen, true)
		}
	}
	return Result{Latch: res}
}

// Latch describes a latch's current generation; Generation is 0 when there
// is no latch of that name.
func (m *Machine) Latch(name string) LatchInfo {
	if l := m.latches.byName[name]; l != nil {
		return l.info()
	}
	return LatchInfo{Name: name}
}

// LatchCount returns the number of latches.
func (m *Machine) LatchCount() int { return len(m.latches.byName) }

// snapshot implements section.
func (t *latchTable) snapshot(st *statev1.State) {
	for _, name := range sortedKeys(t.byName) {
		l := t.byName[name]
		st.Latches = append(st.Latches, &statev1.Latch{Name: l.name, Generation: l.generation, Count: l.count, Initial: l.initial, Counted: l.order, CreatedAtUnixMs: l.createdAt, CreatedBy: l.createdBy})
	}
}

// restore implements section. A latch no sequence of commands could reach
// is refused.
func (t *latchTable) restore(st *statev1.State) error {
	for _, pl := range st.GetLatches() {
		l := &latch{name: pl.GetName(), generation: pl.GetGeneration(), count: pl.GetCount(), initial: pl.GetInitial(), createdAt: pl.GetCreatedAtUnixMs(), createdBy: pl.GetCreatedBy()}
		switch {
		case len(l.createdBy) > maxLatchRequestID:
			return broken("latch %q was created by a request id of %d bytes", l.name, len(l.createdBy))
		case storedName(l.name) != nil:
			return broken("latch name %q: %v", l.name, storedName(l.name))
		case t.byName[l.name] != nil:
			return broken("the snapshot lists latch %q twice", l.name)
		case l.generation == 0:
			return broken("latch %q has generation 0", l.name)
		case l.initial > MaxLatchCount || l.count > l.initial:
			return broken("latch %q has count %d of %d (at most %d)", l.name, l.count, l.initial, MaxLatchCount)
		case uint64(len(pl.GetCounted())) > l.initial-l.count:
			return broken("latch %q lists %d count-downs but counted down %d", l.name, len(pl.GetCounted()), l.initial-l.count)
		}
		for _, id := range pl.GetCounted() {
			if l.counted[id] || id == "" || len(id) > maxLatchRequestID {
				return broken("latch %q lists count-down request id %q twice or malformed", l.name, id)
			}
			if l.counted == nil {
				l.counted = make(map[string]bool)
			}
			l.counted[id] = true
			l.order = append(l.order, id)
		}
		t.byName[l.name] = l
	}
	return nil
}
