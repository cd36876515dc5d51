package fsm

import (
	"fmt"

	fence "github.com/fenced-dev/fenced"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// The exclusive lock, on the shared parts: a grant is bound to its session
// (binding), takes the next token (tokens), waiters queue in a waitQueue
// and are promoted in arrival order, each request's result is remembered
// per session (replies), and the locks are one snapshot section.

// lock is an exclusive lock: its holder and token, and the sessions waiting
// for it in arrival order. A lock that is free with no waiters is deleted.
type lock struct {
	name     string
	holder   uint64 // 0 when free
	token    fence.Token
	issuedAt int64
	queue    waitQueue
	delay    lockDelay // lockdelay.go
}

// lockTable is the exclusive-lock primitive: every lock in use, by name.
type lockTable struct {
	m      *Machine
	byName map[string]*lock
	// spare are locks dropped, up to maxSpareLocks, which new locks reuse,
	// so that a lock cycle on a name nobody else uses allocates no lock.
	// Nothing else points to them.
	spare []*lock
}

// maxSpareLocks bounds lockTable.spare: the locks of as many clients as
// take and release locks of their own in the same entries.
const maxSpareLocks = 256

var _ primitive = (*lockTable)(nil)

func newLockTable(m *Machine) *lockTable {
	return &lockTable{m: m, byName: make(map[string]*lock)}
}

// LockInfo describes a lock.
type LockInfo struct {
	// Name is the lock's name.
	Name string
	// Holder is the current grant; its Token is 0 when the lock is free.
	Holder fence.Grant
	// Waiters are the queued sessions in the order they will be granted.
	Waiters []uint64
	// Delay is the lock delay of the grant and the pending one, if any.
	Delay DelayInfo
}

// Held reports whether the lock has a holder.
func (i LockInfo) Held() bool { return i.Holder.Token != 0 }

// heldBy reports whether session sid holds l. A free lock (holder 0, as
// during its delay) is held by no session, session 0 included: a command
// naming session 0 must never pass for the holder's and release it, which
// would grant the first waiter during the delay.
func (l *lock) heldBy(sid uint64) bool { return l.holder != 0 && l.holder == sid }

func (t *lockTable) dropIfIdle(name string) {
	if l := t.byName[name]; l != nil && l.holder == 0 && l.queue.len() == 0 && !l.delay.pending() {
		delete(t.byName, name)
		if len(t.spare) < maxSpareLocks {
			t.spare = append(t.spare, l)
		}
	}
}

// newLock returns a free lock named name, a spare one if there is one.
func (t *lockTable) newLock(name string) *lock {
	n := len(t.spare)
	if n == 0 {
		return &lock{name: name}
	}
	l := t.spare[n-1]
	t.spare[n-1] = nil
	t.spare = t.spare[:n-1]
	*l = lock{name: name}
	return l
}

// liveGrant describes the grant l holds: of kind lock, with the lock's
// name as its scope.
func (l *lock) liveGrant() liveGrant {
	return liveGrant{kind: kindCode(fence.KindLock), name: l.name, scope: l.name, session: l.holder, issuedAt: l.issuedAt}
}

// A lock's grants are of kind lock with the lock's name as their scope.
func (t *lockTable) grantOf(l *lock) fence.Grant {
	return t.m.grant(fence.KindLock, l.name, l.name, l.token, l.holder, l.issuedAt)
}

func (t *lockTable) acquire(a *statev1.Acquire, now int64) Result {
	m, name := t.m, a.GetName()
	if err := validateLockDelay(a.GetLockDelayMs()); err != nil {
		return Result{Err: err}
	}
	s, seq, created, rep, err := m.startAcquire(a, name)
	if err != nil {
		return Result{Err: err}
	}
	sid := s.id
	if rep != nil {
		return Result{Session: sid, Granted: true, Grant: m.grant(fence.KindLock, rep.name, rep.name, rep.token, sid, rep.issuedAt)}
	}
	l := t.byName[name]
	if l == nil {
		l = t.newLock(name)
		t.byName[name] = l
	}
	free := l.holder == 0 && !l.delay.pending()
	if free || (l.holder != sid && a.GetWait() && !l.queue.has(sid)) {
		if err := checkHoldQuota(s, a.GetQuota(), !free); err != nil {
			t.dropIfIdle(name)
			if created {
				m.endSession(sid, OneShotUnused, now)
			}
			return Result{Err: err}
		}
	}
	switch {
	case free:
		g := m.issueGrant(fence.KindLock, name, name, sid, now) // exhaustion was checked above
		l.holder, l.token, l.issuedAt = sid, g.Token, now
		m.live.addLock(g.Token, l)
		l.delay.holderMs = a.GetLockDelayMs()
		s.hold(kindLock, name)
		s.replies.put(reply{seq: seq, kind: replyGranted, name: name, token: g.Token, issuedAt: now})
		m.obs.Granted(g)
		return Result{Session: sid, Granted: true, Grant: g}
	case l.heldBy(sid):
		s.replies.put(reply{seq: seq, kind: replyGranted, name: name, token: l.token, issuedAt: l.issuedAt})
		return Result{Session: sid, Granted: true, Grant: t.grantOf(l)}
	case a.GetWait():
		m.enqueue(kindLock, fence.KindLock, name, &l.queue, s, seq)
		l.delay.setWaiter(sid, a.GetLockDelayMs())
		s.replies.put(reply{seq: seq, kind: replyQueued, name: name, holder: l.holder})
		return Result{Session: sid, Queued: true, Holder: l.holder}
	default:
		holder, delayed := l.holder, l.delay.pending()
		s.replies.put(reply{seq: seq, kind: replyNotGranted, name: name, holder: holder})
		if created {
			m.endSession(sid, OneShotUnused, now)
		}
		return Result{Session: sid, Holder: holder, Delayed: delayed}
	}
}

func (t *lockTable) release(r *statev1.Release, now int64) Result {
	return t.m.release(t, r, now)
}

// releaseOwn implements releaser.
func (t *lockTable) releaseOwn(name string, s *session, sid uint64, now int64) ReleaseResult {
	l := t.byName[name]
	switch {
	case l == nil:
		return AlreadyReleased
	case l.heldBy(sid):
		t.releaseHeld(l, Unlocked, now)
		return Released
	}
	if t.m.leaveQueue(kindLock, name, &l.queue, s) {
		t.dropIfIdle(name)
	}
	if l.holder != 0 {
		return NotOwned
	}
	return AlreadyReleased
}

// undoGrant implements releaser.
func (t *lockTable) undoGrant(name string, sid uint64, tok fence.Token, now int64) bool {
	l := t.byName[name]
	if l == nil || !l.heldBy(sid) || l.token != tok {
		return false
	}
	t.releaseHeld(l, Unlocked, now)
	return true
}

// undoWait implements releaser.
func (t *lockTable) undoWait(name string, s *session, seq uint64, _ int64) {
	if l := t.byName[name]; l != nil && l.queue.queuedBy(s.id, seq) {
		t.m.leaveQueue(kindLock, name, &l.queue, s)
		t.dropIfIdle(name)
	}
}

// replyName implements releaser: a lock's requests are remembered under
// its name.
func (t *lockTable) replyName(name string) string { return name }

// heldByOther implements releaser.
func (t *lockTable) heldByOther(name string, sid uint64) bool {
	l := t.byName[name]
	return l != nil && l.holder != 0 && l.holder != sid
}

// releaseHeld frees l and grants it to the first waiter, if any, unless
// the grant's end starts its lock delay (lockdelay.go).
func (t *lockTable) releaseHeld(l *lock, reason EndReason, now int64) {
	m := t.m
	if s := m.sessions[l.holder]; s != nil {
		s.unhold(kindLock, l.name)
	}
	ended := l.token
	m.endLockGrant(l, reason)
	l.holder, l.token, l.issuedAt = 0, 0, 0
	if t.startDelay(l, ended, reason, now) {
		return
	}
	t.grantNext(l, now)
}

// grantNext grants the free lock l to its first waiter, if any.
func (t *lockTable) grantNext(l *lock, now int64) {
	m := t.m
	if l.queue.len() > 0 && !m.tokens.exhausted() {
		w, g, _ := m.promote(kindLock, l.name, l.name, &l.queue, now)
		l.holder, l.token, l.issuedAt = w.session, g.Token, now
		m.live.addLock(g.Token, l)
		l.delay.grantedTo(w.session)
		m.obs.Granted(g)
		return
	}
	t.dropIfIdle(l.name)
}

func (t *lockTable) cancelWait(sid uint64, name string) Result {
	l := t.byName[name]
	if l == nil {
		return Result{Session: sid}
	}
	if l.heldBy(sid) {
		return Result{Session: sid, Granted: true, Grant: t.grantOf(l)}
	}
	t.m.leaveQueue(kindLock, name, &l.queue, t.m.sessions[sid])
	holder := l.holder
	t.dropIfIdle(name)
	return Result{Session: sid, Holder: holder}
}

// endSession implements primitive.
func (t *lockTable) endSession(s *session, reason EndReason, now int64) {
	s.bound(kindLock).end(func(name string) {
		t.m.leaveQueue(kindLock, name, &t.byName[name].queue, s)
		t.dropIfIdle(name)
	}, func(name string) {
		t.releaseHeld(t.byName[name], reason, now)
	})
}

// snapshot implements section.
func (t *lockTable) snapshot(st *statev1.State) {
	for _, name := range sortedKeys(t.byName) {
		l := t.byName[name]
		pl := &statev1.Lock{Name: l.name, Holder: l.holder, Token: uint64(l.token), IssuedAtUnixMs: l.issuedAt}
		for _, w := range l.queue.list {
			pl.Waiters = append(pl.Waiters, &statev1.Waiter{Session: w.session, Seq: w.seq})
		}
		l.delay.snapshot(l, pl)
		st.Locks = append(st.Locks, pl)
	}
}

// restore implements section.
func (t *lockTable) restore(st *statev1.State) error {
	t.byName = make(map[string]*lock, len(st.GetLocks())) // empty after reset
	for _, pl := range st.GetLocks() {
		l := &lock{name: pl.GetName(), holder: pl.GetHolder(), token: fence.Token(pl.GetToken()), issuedAt: pl.GetIssuedAtUnixMs()}
		if l.holder != 0 {
			s := t.m.sessions[l.holder]
			if s == nil {
				return fmt.Errorf("lock %q is held by unknown session %d", l.name, l.holder)
			}
			s.hold(kindLock, l.name)
		}
		for _, w := range pl.GetWaiters() {
			s := t.m.sessions[w.GetSession()]
			if s == nil {
				return fmt.Errorf("lock %q has unknown waiter session %d", l.name, w.GetSession())
			}
			s.wait(kindLock, l.name)
			l.queue.list = append(l.queue.list, waiter{session: w.GetSession(), seq: w.GetSeq(), kind: fence.KindLock})
		}
		if err := l.delay.restore(l, pl); err != nil {
			return err
		}
		t.byName[l.name] = l
	}
	return nil
}

// eachGrant implements primitive.
func (t *lockTable) eachGrant(fn func(tok fence.Token, g liveGrant)) {
	for _, l := range t.byName {
		if l.holder != 0 {
			fn(l.token, l.liveGrant())
		}
	}
}

// Lock describes one lock; a free lock without waiters reports a zero Holder.
func (m *Machine) Lock(name string) LockInfo {
	l := m.locks.byName[name]
	if l == nil {
		return LockInfo{Name: name}
	}
	return m.locks.info(l)
}

func (t *lockTable) info(l *lock) LockInfo {
	info := LockInfo{Name: l.name, Waiters: l.queue.sessions(), Delay: l.delay.info()}
	if l.holder != 0 {
		info.Holder = t.grantOf(l)
	}
	return info
}

// WaiterCount returns the number of queued acquires over all locks.
func (m *Machine) WaiterCount() int {
	n := 0
	for _, l := range m.locks.byName {
		n += l.queue.len()
	}
	return n
}

// HeldCount returns the number of held locks.
func (m *Machine) HeldCount() int {
	n := 0
	for _, l := range m.locks.byName {
		if l.holder != 0 {
			n++
		}
	}
	return n
}
