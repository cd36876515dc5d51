package fsm

import (
	"fmt"
	"sort"
	"strconv"

	fence "github.com/fenced-dev/fenced"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// The counting semaphore, on the shared parts: a session's permits of one
// semaphore are bound to it as one holding (binding), each permit takes
// the next token (tokens) and the lowest free slot, waiters queue in a
// waitQueue with the number of permits they want and are served strictly
// in arrival order (the head is never overtaken by a smaller request
// behind it), each request's result is remembered per session (replies),
// and the semaphores are one snapshot section.

// MaxCapacity is the largest capacity of a semaphore.
const MaxCapacity = 1_000_000

// permit is one live permit of a semaphore.
type permit struct {
	slot     uint32
	session  uint64
	token    fence.Token
	issuedAt int64
}

// semaphore is a counting semaphore in use: its capacity, its live permits
// by slot and by session, and its waiters. A semaphore without permits or
// waiters is deleted, and with it its capacity.
type semaphore struct {
	name     string
	capacity uint32
	bySlot   map[uint32]*permit
	// held lists each holding session's slots, ascending.
	held  map[uint64][]uint32
	queue waitQueue
	// want is the number of permits each queued session waits for.
	want map[uint64]uint32
}

func (s *semaphore) free() uint32 {
	if n := uint32(len(s.bySlot)); n < s.capacity {
		return s.capacity - n
	}
	return 0
}

// free is the number of permits a request may take from sem: its free
// permits, or one more under the over-capacity test fault (faults_on.go)
// while no more than capacity are live.
func (t *semaphoreTable) free(sem *semaphore) uint32 {
	if t.m.faults.overCapacity() && uint32(len(sem.bySlot)) <= sem.capacity {
		return sem.free() + 1
	}
	return sem.free()
}

func (s *semaphore) idle() bool { return len(s.bySlot) == 0 && s.queue.len() == 0 }

// semaphoreTable is the semaphore primitive: every semaphore in use, by
// name.
type semaphoreTable struct {
	m      *Machine
	byName map[string]*semaphore
}

var _ primitive = (*semaphoreTable)(nil)

func newSemaphoreTable(m *Machine) *semaphoreTable {
	return &semaphoreTable{m: m, byName: make(map[string]*semaphore)}
}

// Permit is one permit of a semaphore: its slot and its grant (with its
// own token). Fence the resource of slot n of semaphore "pool" as the
// object "pool/n" (Scope).
type Permit struct {
	// Slot is 0 to capacity-1, unique among the live permits.
	Slot uint32
	// Grant is the permit's grant.
	Grant fence.Grant
}

// Scope returns the object a resource fences this permit's slot as:
// "name/slot".
func (p Permit) Scope() string { return SlotScope(p.Grant.Name, p.Slot) }

// SlotScope is the object that fences slot of semaphore name: "name/slot".
func SlotScope(name string, slot uint32) string {
	return name + "/" + strconv.FormatUint(uint64(slot), 10)
}

// SemaphoreWaiter is a queued acquire: its session and how many permits it
// waits for.
type SemaphoreWaiter struct {
	Session uint64
	Permits uint32
}

// SemaphoreInfo describes a semaphore.
type SemaphoreInfo struct {
	// Name is the semaphore's name.
	Name string
	// Capacity is 0 when the semaphore is not in use.
	Capacity uint32
	// Permits are the live permits by slot.
	Permits []Permit
	// Waiters are the queued acquires in the order they will be served.
	Waiters []SemaphoreWaiter
}

// semReplyName is the name a semaphore request is remembered under in its
// session's replies: apart from a lock of the same name (a name has no
// control characters, so none collides).
func semReplyName(name string) string { return "\x00semaphore\x00" + name }

// ValidateCapacity checks a semaphore capacity: 1 to MaxCapacity.
func ValidateCapacity(capacity uint32) error {
	if capacity == 0 || capacity > MaxCapacity {
		return fmt.Errorf("%w: capacity is %d; a semaphore has 1 to %d permits", fence.ErrInvalidArgument, capacity, MaxCapacity)
	}
	return nil
}

// ValidatePermits checks the number of permits of one acquire: 1 to
// capacity.
func ValidatePermits(permits, capacity uint32) error {
	if permits == 0 || permits > capacity {
		return fmt.Errorf("%w: %d permits asked of a semaphore of capacity %d; ask for 1 to %d", fence.ErrInvalidArgument, permits, capacity, capacity)
	}
	return nil
}

func (t *semaphoreTable) capacityMismatch(sem *semaphore, asked uint32) error {
	return fmt.Errorf("%w: semaphore %q has capacity %d while %d of its permits are live and %d acquires wait; this acquire asked for capacity %d. Use capacity %d, or wait until every permit is released to set another",
		fence.ErrCapacityMismatch, sem.name, sem.capacity, len(sem.bySlot), sem.queue.len(), asked, sem.capacity)
}

// isRetry reports whether a names a request already applied: its session
// remembers its seq (or, for a per-grant session, its request id made one).
func (t *semaphoreTable) isRetry(a *statev1.SemAcquire) bool {
	m := t.m
	if a.GetSession() == 0 {
		id, ok := m.byRequest[a.GetRequestId()]
		return ok && a.GetRequestId() != "" && !m.sessions[id].replies.empty()
	}
	s := m.sessions[a.GetSession()]
	return s != nil && a.GetSeq() > 0 && s.replies.find(a.GetSeq()) >= 0
}

func (t *semaphoreTable) acquire(a *statev1.SemAcquire, now int64) Result {
	m, name := t.m, a.GetName()
	if err := fence.ValidateName(name); err != nil {
		return Result{Err: err}
	}
	if err := ValidateCapacity(a.GetCapacity()); err != nil {
		return Result{Err: err}
	}
	if err := ValidatePermits(a.GetPermits(), a.GetCapacity()); err != nil {
		return Result{Err: err}
	}
	if m.issuer == "" {
		return Result{Err: errNotInitialised()}
	}
	if fence.MaxToken-m.tokens.last < fence.Token(a.GetPermits()) {
		return Result{Err: m.tokens.overflow()}
	}
	sem := t.byName[name]
	if sem != nil && sem.capacity != a.GetCapacity() && !t.isRetry(a) {
		return Result{Err: t.capacityMismatch(sem, a.GetCapacity())}
	}
	s, seq, created, err := m.requestSession(a.GetSession(), a.GetSeq(), a.GetRequestId(), a.GetTtlMs(), a.GetQuota(), a.GetSecretHash())
	if err != nil {
		return Result{Err: err}
	}
	sid, rname := s.id, semReplyName(name)
	if seq > 0 {
		rep, ok, err := s.replies.get(seq, rname)
		switch {
		case err != nil:
			return Result{Err: err}
		case ok && rep.kind.isRelease():
			return Result{Err: fmt.Errorf("%w: request seq %d was already used for a release; every request needs its own seq", fence.ErrInvalidArgument, seq)}
		case ok && rep.kind == replyWithdrawn:
			return Result{Err: fmt.Errorf("%w: request seq %d was withdrawn by a release; every request needs its own seq", fence.ErrInvalidArgument, seq)}
		case ok && rep.kind == replyGranted:
			if sem != nil && len(sem.held[sid]) > 0 && sem.bySlot[sem.held[sid][0]].token == rep.token {
				return t.granted(sem, sid)
			}
			return Result{Err: fmt.Errorf("%w: the permits of %q granted to request seq %d of session %d were released since", fence.ErrLockLost, name, seq, sid)}
		}
	}
	if sem != nil && sem.capacity != a.GetCapacity() {
		return Result{Err: t.capacityMismatch(sem, a.GetCapacity())}
	}
	if sem != nil && len(sem.held[sid]) > 0 {
		if n := len(sem.held[sid]); n != int(a.GetPermits()) {
			return Result{Err: fmt.Errorf("%w: session %d already holds %d permits of %q; release them before it asks for %d", fence.ErrInvalidArgument, sid, n, name, a.GetPermits())}
		}
		s.replies.put(reply{seq: seq, kind: replyGranted, name: rname, token: sem.bySlot[sem.held[sid][0]].token})
		return t.granted(sem, sid)
	}
	if sem == nil {
		sem = &semaphore{name: name, capacity: a.GetCapacity(), bySlot: map[uint32]*permit{}, held: map[uint64][]uint32{}, want: map[uint64]uint32{}}
		t.byName[name] = sem
	}
	queued := sem.queue.has(sid)
	if queued && sem.want[sid] != a.GetPermits() {
		return Result{Err: fmt.Errorf("%w: session %d already waits for %d permits of %q; it cannot ask for %d as well", fence.ErrInvalidArgument, sid, sem.want[sid], name, a.GetPermits())}
	}
	// FIFO without overtaking: permits are free for a new request only
	// when nobody waits.
	grant := !queued && sem.queue.len() == 0 && a.GetPermits() <= t.free(sem)
	if grant || (a.GetWait() && !queued) {
		if err := checkHoldQuota(s, a.GetQuota(), !grant); err != nil {
			t.dropIfIdle(name)
			if created {
				m.endSession(sid, OneShotUnused, now)
			}
			return Result{Err: err}
		}
	}
	switch {
	case grant:
		t.take(sem, sid, t.freeSlots(sem, a.GetPermits()), fence.Grant{}, now)
		s.hold(kindSemaphore, name)
		s.replies.put(reply{seq: seq, kind: replyGranted, name: rname, token: sem.bySlot[sem.held[sid][0]].token, issuedAt: now})
		return t.granted(sem, sid)
	case a.GetWait():
		if !queued {
			m.enqueue(kindSemaphore, fence.KindPermit, name, &sem.queue, s, seq)
			sem.want[sid] = a.GetPermits()
		}
		s.replies.put(reply{seq: seq, kind: replyQueued, name: rname})
		return Result{Session: sid, Queued: true, Available: sem.free(), Capacity: sem.capacity}
	default:
		s.replies.put(reply{seq: seq, kind: replyNotGranted, name: rname})
		free, capacity := sem.free(), sem.capacity
		t.dropIfIdle(name)
		if created {
			m.endSession(sid, OneShotUnused, now)
		}
		return Result{Session: sid, Available: free, Capacity: capacity}
	}
}

// granted is the result of an acquire that holds sid's permits of sem.
func (t *semaphoreTable) granted(sem *semaphore, sid uint64) Result {
	ps := t.permitsOf(sem, sid)
	return Result{Session: sid, Granted: true, Grant: ps[0].Grant, Permits: ps, Capacity: sem.capacity}
}

// freeSlots returns the n lowest free slots of sem; the caller checked
// that n are free.
func (t *semaphoreTable) freeSlots(sem *semaphore, n uint32) []uint32 {
	slots := make([]uint32, 0, n)
	for slot := uint32(0); uint32(len(slots)) < n; slot++ {
		if sem.bySlot[slot] == nil {
			slots = append(slots, slot)
		}
	}
	return slots
}

// take gives session sid the permits of slots (ascending), each a grant
// of kind permit with scope "name/slot" and its own token, and pushes each
// grant. first, when its token is not 0, is the grant of slots[0] already
// issued (Machine.promote issues a waiter's first grant). The caller
// checked that the slots are free and that enough tokens are left, and
// binds the holding to the session.
func (t *semaphoreTable) take(sem *semaphore, sid uint64, slots []uint32, first fence.Grant, now int64) {
	m := t.m
	for i, slot := range slots {
		g := first
		if i > 0 || g.Token == 0 {
			g = m.issueGrant(fence.KindPermit, sem.name, SlotScope(sem.name, slot), sid, now)
		}
		sem.bySlot[slot] = &permit{slot: slot, session: sid, token: g.Token, issuedAt: now}
		m.obs.Granted(g)
	}
	sem.held[sid] = slots
}

// serve grants waiters from the head of the queue while the head's
// request fits in the free permits. It stops at the first that does not:
// a big request at the head is never overtaken by smaller ones behind it.
func (t *semaphoreTable) serve(sem *semaphore, now int64) {
	m := t.m
	for sem.queue.len() > 0 {
		head := sem.queue.list[0]
		n := sem.want[head.session]
		if n > t.free(sem) || fence.MaxToken-m.tokens.last < fence.Token(n) {
			return
		}
		slots := t.freeSlots(sem, n)
		_, g, _ := m.promote(kindSemaphore, sem.name, SlotScope(sem.name, slots[0]), &sem.queue, now)
		delete(sem.want, head.session)
		t.take(sem, head.session, slots, g, now)
	}
}

func (t *semaphoreTable) dropIfIdle(name string) {
	if sem := t.byName[name]; sem != nil && sem.idle() {
		delete(t.byName, name)
	}
}

// releaseHolding ends every permit session sid holds of sem, then serves
// the waiters the freed permits fit.
func (t *semaphoreTable) releaseHolding(sem *semaphore, sid uint64, reason EndReason, now int64) {
	m := t.m
	if s := m.sessions[sid]; s != nil {
		s.unhold(kindSemaphore, sem.name)
	}
	for _, slot := range sem.held[sid] {
		p := sem.bySlot[slot]
		delete(sem.bySlot, slot)
		m.endGrant(p.token, reason)
	}
	delete(sem.held, sid)
	t.serve(sem, now)
	t.dropIfIdle(sem.name)
}

// leave takes session s out of sem's queue (pushing the end of its wait)
// and serves the waiters behind it that now fit.
func (t *semaphoreTable) leave(sem *semaphore, s *session, now int64) bool {
	if !t.m.leaveQueue(kindSemaphore, sem.name, &sem.queue, s) {
		return false
	}
	delete(sem.want, s.id)
	t.serve(sem, now)
	t.dropIfIdle(sem.name)
	return true
}

// release applies r through the releases shared by every primitive
// (withdraw.go): a session's permits of r.name are released, its place in
// the queue given up, or one acquire withdrawn.
func (t *semaphoreTable) release(r *statev1.SemRelease, now int64) Result {
	return t.m.release(t, r, now)
}

// releaseOwn implements releaser.
func (t *semaphoreTable) releaseOwn(name string, s *session, sid uint64, now int64) ReleaseResult {
	sem := t.byName[name]
	switch {
	case sem == nil:
		return AlreadyReleased
	case len(sem.held[sid]) > 0:
		t.releaseHolding(sem, sid, Unlocked, now)
		return Released
	}
	t.leave(sem, s, now)
	if t.heldByOther(name, sid) {
		return NotOwned
	}
	return AlreadyReleased
}

// undoGrant implements releaser: the permits of an acquire are released
// while the session still holds them, tokens included.
func (t *semaphoreTable) undoGrant(name string, sid uint64, tok fence.Token, now int64) bool {
	sem := t.byName[name]
	if sem == nil || len(sem.held[sid]) == 0 || sem.bySlot[sem.held[sid][0]].token != tok {
		return false
	}
	t.releaseHolding(sem, sid, Unlocked, now)
	return true
}

// undoWait implements releaser.
func (t *semaphoreTable) undoWait(name string, s *session, seq uint64, now int64) {
	if sem := t.byName[name]; sem != nil && sem.queue.queuedBy(s.id, seq) {
		t.leave(sem, s, now)
	}
}

// heldByOther implements releaser: some session other than sid holds
// permits of name.
func (t *semaphoreTable) heldByOther(name string, sid uint64) bool {
	sem := t.byName[name]
	return sem != nil && len(sem.bySlot) > len(sem.held[sid])
}

// replyName implements releaser.
func (t *semaphoreTable) replyName(name string) string { return semReplyName(name) }

// cancelWait takes session sid out of name's queue after its call gave
// up; if its permits won the race, it reports them granted.
func (t *semaphoreTable) cancelWait(sid uint64, name string, now int64) Result {
	sem := t.byName[name]
	if sem == nil {
		return Result{Session: sid}
	}
	if len(sem.held[sid]) > 0 {
		return t.granted(sem, sid)
	}
	if s := t.m.sessions[sid]; s != nil {
		t.leave(sem, s, now)
	}
	return Result{Session: sid}
}

// endSession implements primitive.
func (t *semaphoreTable) endSession(s *session, reason EndReason, now int64) {
	s.bound(kindSemaphore).end(func(name string) {
		t.leave(t.byName[name], s, now)
	}, func(name string) {
		t.releaseHolding(t.byName[name], s.id, reason, now)
	})
}

// snapshot implements section.
func (t *semaphoreTable) snapshot(st *statev1.State) {
	for _, name := range sortedKeys(t.byName) {
		sem := t.byName[name]
		ps := &statev1.Semaphore{Name: sem.name, Capacity: sem.capacity}
		for _, slot := range sortedSlots(sem.bySlot) {
			p := sem.bySlot[slot]
			ps.Permits = append(ps.Permits, &statev1.Permit{Slot: p.slot, Session: p.session, Token: uint64(p.token), IssuedAtUnixMs: p.issuedAt})
		}
		for _, w := range sem.queue.list {
			ps.Waiters = append(ps.Waiters, &statev1.SemWaiter{Session: w.session, Seq: w.seq, Permits: sem.want[w.session]})
		}
		st.Semaphores = append(st.Semaphores, ps)
	}
}

// restore implements section.
func (t *semaphoreTable) restore(st *statev1.State) error {
	for _, ps := range st.GetSemaphores() {
		sem := &semaphore{name: ps.GetName(), capacity: ps.GetCapacity(), bySlot: map[uint32]*permit{}, held: map[uint64][]uint32{}, want: map[uint64]uint32{}}
		if _, dup := t.byName[sem.name]; dup {
			return fmt.Errorf("semaphore %q is listed twice", sem.name)
		}
		for _, pp := range ps.GetPermits() {
			p := &permit{slot: pp.GetSlot(), session: pp.GetSession(), token: fence.Token(pp.GetToken()), issuedAt: pp.GetIssuedAtUnixMs()}
			s := t.m.sessions[p.session]
			if s == nil {
				return fmt.Errorf("semaphore %q slot %d is held by unknown session %d", sem.name, p.slot, p.session)
			}
			if sem.bySlot[p.slot] != nil {
				return fmt.Errorf("semaphore %q lists slot %d twice", sem.name, p.slot)
			}
			s.hold(kindSemaphore, sem.name)
			sem.bySlot[p.slot] = p
			sem.held[p.session] = append(sem.held[p.session], p.slot)
		}
		for _, w := range ps.GetWaiters() {
			s := t.m.sessions[w.GetSession()]
			if s == nil {
				return fmt.Errorf("semaphore %q has unknown waiter session %d", sem.name, w.GetSession())
			}
			if !sem.queue.push(waiter{session: w.GetSession(), seq: w.GetSeq(), kind: fence.KindPermit}) {
				return fmt.Errorf("semaphore %q lists waiter session %d twice", sem.name, w.GetSession())
			}
			s.wait(kindSemaphore, sem.name)
			sem.want[w.GetSession()] = w.GetPermits()
		}
		for sid := range sem.held {
			sort.Slice(sem.held[sid], func(i, j int) bool { return sem.held[sid][i] < sem.held[sid][j] })
		}
		t.byName[sem.name] = sem
	}
	return nil
}

// eachGrant implements primitive.
func (t *semaphoreTable) eachGrant(fn func(tok fence.Token, g liveGrant)) {
	for _, sem := range t.byName {
		for _, p := range sem.bySlot {
			fn(p.token, liveGrant{kind: kindCode(fence.KindPermit), name: sem.name, scope: SlotScope(sem.name, p.slot), session: p.session, issuedAt: p.issuedAt})
		}
	}
}

func sortedSlots(bySlot map[uint32]*permit) []uint32 {
	slots := make([]uint32, 0, len(bySlot))
	for s := range bySlot {
		slots = append(slots, s)
	}
	sort.Slice(slots, func(i, j int) bool { return slots[i] < slots[j] })
	return slots
}

func (t *semaphoreTable) permitOf(sem *semaphore, p *permit) Permit {
	return Permit{Slot: p.slot, Grant: t.m.grant(fence.KindPermit, sem.name, SlotScope(sem.name, p.slot), p.token, p.session, p.issuedAt)}
}

// permitsOf returns the permits session sid holds of sem, by slot.
func (t *semaphoreTable) permitsOf(sem *semaphore, sid uint64) []Permit {
	out := make([]Permit, 0, len(sem.held[sid]))
	for _, slot := range sem.held[sid] {
		out = append(out, t.permitOf(sem, sem.bySlot[slot]))
	}
	return out
}

// Semaphore describes one semaphore; one not in use has capacity 0.
func (m *Machine) Semaphore(name string) SemaphoreInfo {
	sem := m.semaphores.byName[name]
	if sem == nil {
		return SemaphoreInfo{Name: name}
	}
	info := SemaphoreInfo{Name: name, Capacity: sem.capacity}
	for _, slot := range sortedSlots(sem.bySlot) {
		info.Permits = append(info.Permits, m.semaphores.permitOf(sem, sem.bySlot[slot]))
	}
	for _, w := range sem.queue.list {
		info.Waiters = append(info.Waiters, SemaphoreWaiter{Session: w.session, Permits: sem.want[w.session]})
	}
	return info
}

// SemaphoreHolding returns the permits session holds of semaphore name,
// by slot (none when it holds none), and whether it waits for some.
func (m *Machine) SemaphoreHolding(name string, session uint64) (permits []Permit, waiting bool) {
	sem := m.semaphores.byName[name]
	if sem == nil {
		return nil, false
	}
	if len(sem.held[session]) > 0 {
		return m.semaphores.permitsOf(sem, session), false
	}
	return nil, sem.queue.has(session)
}

// SemaphoreCounts returns the number of live permits and of queued
// acquires over all semaphores.
func (m *Machine) SemaphoreCounts() (permits, waiters int) {
	for _, sem := range m.semaphores.byName {
		permits += len(sem.bySlot)
		waiters += sem.queue.len()
	}
	return permits, waiters
}
