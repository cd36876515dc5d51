package fsm

import (
	"fmt"

	fence "github.com/fenced-dev/fenced"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// The fair read/write lock, on the shared parts: shared readers or one
// exclusive writer, and ONE FIFO queue for both modes. A request is
// admitted at once only when the queue is empty and its mode is compatible
// with the holders (a read with readers or none, a write with none), so a
// waiting writer holds back every reader that comes after it: a stream of
// readers cannot starve a writer. When the holders change, the head of the
// queue is admitted while it is compatible: a writer alone, or every
// reader up to the next writer together. Every grant, read or write,
// takes its own token from the one counter, so a writer's token is above
// the token of every reader it followed.
//
// A session holds at most one grant of a name, in one mode: asking again
// in the same mode returns that grant; asking in the other mode is refused
// (upgrade and downgrade are not offered: two readers that both wait to
// upgrade would each wait for the other to leave).

// rwHolder is one grant of a read/write lock.
type rwHolder struct {
	session  uint64
	write    bool
	token    fence.Token
	issuedAt int64
}

// rwlock is one read/write lock: its holders in admission (token) order,
// one writer alone or readers, and its queue, whose waiters ask for
// fence.KindRead or fence.KindWrite. A lock without holders or waiters is
// deleted.
type rwlock struct {
	name    string
	holders []rwHolder
	queue   waitQueue
}

// rwTable is the read/write lock primitive: every read/write lock in use,
// by name.
type rwTable struct {
	m      *Machine
	byName map[string]*rwlock
}

var _ primitive = (*rwTable)(nil)

func newRWTable(m *Machine) *rwTable {
	return &rwTable{m: m, byName: make(map[string]*rwlock)}
}

// RWWaiter is a queued read/write lock request.
type RWWaiter struct {
	// Session is the waiting session.
	Session uint64
	// Write is true for a writer, false for a reader.
	Write bool
}

// RWLockInfo describes a read/write lock.
type RWLockInfo struct {
	// Name is the lock's name.
	Name string
	// Readers are the read grants, in the order they were admitted.
	Readers []fence.Grant
	// Writer is the write grant; its Token is 0 when no writer holds it.
	Writer fence.Grant
	// Waiters are the queued requests in the order they will be admitted.
	Waiters []RWWaiter
}

// rwKind is the kind of a grant of the mode; its scope is the lock's name.
func rwKind(write bool) fence.Kind {
	if write {
		return fence.KindWrite
	}
	return fence.KindRead
}

// rwReplyName is the name a read/write lock request is remembered under in
// its session's replies: apart from a lock (or another primitive) of the
// same name, since a name has no control characters.
func rwReplyName(name string) string { return "\x00read/write lock\x00" + name }

func modeOf(write bool) statev1.RWMode {
	if write {
		return statev1.RWMode_RW_MODE_WRITE
	}
	return statev1.RWMode_RW_MODE_READ
}

func modeName(write bool) string {
	if write {
		return "write"
	}
	return "read"
}

// validateMode returns whether mode is a write, or an error for a mode
// that is neither read nor write.
func validateMode(mode statev1.RWMode) (write bool, err error) {
	switch mode {
	case statev1.RWMode_RW_MODE_READ:
		return false, nil
	case statev1.RWMode_RW_MODE_WRITE:
		return true, nil
	}
	return false, fmt.Errorf("%w: read/write lock mode %d is neither read (1) nor write (2)", fence.ErrInvalidArgument, int32(mode))
}

func (l *rwlock) holder(session uint64) (int, bool) {
	for i, h := range l.holders {
		if h.session == session {
			return i, true
		}
	}
	return -1, false
}

func (l *rwlock) hasWriter() bool { return len(l.holders) == 1 && l.holders[0].write }

// compatible reports whether a grant of the mode can join the holders.
func (l *rwlock) compatible(write bool) bool {
	if write {
		return len(l.holders) == 0
	}
	return !l.hasWriter()
}

// firstHolder is the session of the oldest grant, 0 when none.
func (l *rwlock) firstHolder() uint64 {
	if len(l.holders) == 0 {
		return 0
	}
	return l.holders[0].session
}

func (t *rwTable) dropIfIdle(name string) {
	if l := t.byName[name]; l != nil && len(l.holders) == 0 && l.queue.len() == 0 {
		delete(t.byName, name)
	}
}

func (t *rwTable) grantOf(l *rwlock, h rwHolder) fence.Grant {
	return t.m.grant(rwKind(h.write), l.name, l.name, h.token, h.session, h.issuedAt)
}

// admit grants l to a new holder of the mode with the next token; the
// caller checked that a token is left.
func (t *rwTable) admit(l *rwlock, s *session, write bool, now int64) fence.Grant {
	g := t.m.issueGrant(rwKind(write), l.name, l.name, s.id, now)
	l.holders = append(l.holders, rwHolder{session: s.id, write: write, token: g.Token, issuedAt: now})
	s.hold(kindRWLock, l.name)
	t.m.obs.Granted(g)
	return g
}

func (t *rwTable) acquire(a *statev1.RWAcquire, now int64) Result {
	m, name := t.m, a.GetName()
	write, err := validateMode(a.GetMode())
	if err != nil {
		return Result{Err: err}
	}
	rname := rwReplyName(name)
	s, seq, created, rep, err := m.startAcquire(a, rname)
	if err != nil {
		return Result{Err: err}
	}
	sid := s.id
	if rep != nil {
		return Result{Session: sid, Granted: true, Grant: m.grant(rwKind(write), name, name, rep.token, sid, rep.issuedAt)}
	}
	l := t.byName[name]
	if i, ok := l.holderOf(sid); ok {
		h := l.holders[i]
		if h.write != write {
			return Result{Err: errModeChange(sid, name, h.write)}
		}
		s.replies.put(reply{seq: seq, kind: replyGranted, name: rname, token: h.token, issuedAt: h.issuedAt})
		return Result{Session: sid, Granted: true, Grant: t.grantOf(l, h)}
	}
	if k, ok := l.waitKind(sid); ok && k != rwKind(write) {
		return Result{Err: fmt.Errorf("%w: session %d already waits for a %s grant of %q; it cannot wait for a %s grant too", fence.ErrInvalidArgument, sid, k, name, modeName(write))}
	}
	if l == nil {
		l = &rwlock{name: name}
		t.byName[name] = l
	}
	// The reader-with-writer test fault (faults_on.go) admits a reader
	// beside a writer.
	free := l.queue.len() == 0 && (l.compatible(write) || (!write && m.faults.readerBesideWriter()))
	if free || (a.GetWait() && !l.queue.has(sid)) {
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
		g := t.admit(l, s, write, now)
		s.replies.put(reply{seq: seq, kind: replyGranted, name: rname, token: g.Token, issuedAt: now})
		return Result{Session: sid, Granted: true, Grant: g}
	case a.GetWait():
		m.enqueue(kindRWLock, rwKind(write), name, &l.queue, s, seq)
		s.replies.put(reply{seq: seq, kind: replyQueued, name: rname, holder: l.firstHolder()})
		return Result{Session: sid, Queued: true, Holder: l.firstHolder()}
	default:
		holder := l.firstHolder()
		t.dropIfIdle(name)
		s.replies.put(reply{seq: seq, kind: replyNotGranted, name: rname, holder: holder})
		if created {
			m.endSession(sid, OneShotUnused, now)
		}
		return Result{Session: sid, Holder: holder}
	}
}

// waitKind is the kind session waits for in l's queue; false when l is
// nil or session does not wait.
func (l *rwlock) waitKind(session uint64) (fence.Kind, bool) {
	if l == nil {
		return "", false
	}
	for _, w := range l.queue.list {
		if w.session == session {
			return w.kind, true
		}
	}
	return "", false
}

// holderOf finds session's grant in l; false when l is nil or has none.
func (l *rwlock) holderOf(session uint64) (int, bool) {
	if l == nil {
		return -1, false
	}
	return l.holder(session)
}

func errModeChange(sid uint64, name string, heldWrite bool) error {
	return fmt.Errorf("%w: session %d holds a %s grant of %q; release it first: a read/write lock offers no upgrade or downgrade (two readers both waiting to upgrade would wait for each other forever)",
		fence.ErrInvalidArgument, sid, modeName(heldWrite), name)
}

func (t *rwTable) release(r *statev1.RWRelease, now int64) Result {
	return t.m.release(t, r, now)
}

// releaseOwn implements releaser.
func (t *rwTable) releaseOwn(name string, s *session, sid uint64, now int64) ReleaseResult {
	l := t.byName[name]
	if l == nil {
		return AlreadyReleased
	}
	if _, ok := l.holder(sid); ok {
		t.releaseHeld(l, sid, Unlocked, now)
		return Released
	}
	t.leave(l, s, now)
	if len(l.holders) > 0 {
		return NotOwned
	}
	return AlreadyReleased
}

// undoGrant implements releaser.
func (t *rwTable) undoGrant(name string, sid uint64, tok fence.Token, now int64) bool {
	l := t.byName[name]
	i, ok := l.holderOf(sid)
	if !ok || l.holders[i].token != tok {
		return false
	}
	t.releaseHeld(l, sid, Unlocked, now)
	return true
}

// undoWait implements releaser.
func (t *rwTable) undoWait(name string, s *session, seq uint64, now int64) {
	if l := t.byName[name]; l != nil && l.queue.queuedBy(s.id, seq) {
		t.leave(l, s, now)
	}
}

// replyName implements releaser.
func (t *rwTable) replyName(name string) string { return rwReplyName(name) }

// heldByOther implements releaser.
func (t *rwTable) heldByOther(name string, sid uint64) bool {
	if l := t.byName[name]; l != nil {
		for _, h := range l.holders {
			if h.session != sid {
				return true
			}
		}
	}
	return false
}

// releaseHeld ends session's grant of l and admits the waiters it was
// holding back.
func (t *rwTable) releaseHeld(l *rwlock, session uint64, reason EndReason, now int64) {
	m := t.m
	i, ok := l.holder(session)
	if !ok {
		return
	}
	h := l.holders[i]
	l.holders = append(l.holders[:i], l.holders[i+1:]...)
	if s := m.sessions[session]; s != nil {
		s.unhold(kindRWLock, l.name)
	}
	m.endGrant(h.token, reason)
	t.promote(l, now)
}

// leave takes s out of l's queue, if it waits there, and admits the
// waiters behind it that it was holding back (a writer that leaves lets
// the readers after it in).
func (t *rwTable) leave(l *rwlock, s *session, now int64) {
	if t.m.leaveQueue(kindRWLock, l.name, &l.queue, s) {
		t.promote(l, now)
	}
	t.dropIfIdle(l.name)
}

// promote admits the head of l's queue while it is compatible with the
// holders: a writer alone, or every reader up to the next writer.
func (t *rwTable) promote(l *rwlock, now int64) {
	m := t.m
	for l.queue.len() > 0 && !m.tokens.exhausted() && l.compatible(l.queue.list[0].kind == fence.KindWrite) {
		w, g, _ := m.promote(kindRWLock, l.name, l.name, &l.queue, now)
		l.holders = append(l.holders, rwHolder{session: w.session, write: w.kind == fence.KindWrite, token: g.Token, issuedAt: now})
		m.obs.Granted(g)
	}
	t.dropIfIdle(l.name)
}

func (t *rwTable) cancelWait(c *statev1.RWCancelWait, now int64) Result {
	sid, name := c.GetSession(), c.GetName()
	l := t.byName[name]
	if l == nil {
		return Result{Session: sid}
	}
	if i, ok := l.holder(sid); ok {
		return Result{Session: sid, Granted: true, Grant: t.grantOf(l, l.holders[i])}
	}
	holder := l.firstHolder()
	t.leave(l, t.m.sessions[sid], now)
	return Result{Session: sid, Holder: holder}
}

// endSession implements primitive.
func (t *rwTable) endSession(s *session, reason EndReason, now int64) {
	s.bound(kindRWLock).end(func(name string) {
		t.leave(t.byName[name], s, now)
	}, func(name string) {
		t.releaseHeld(t.byName[name], s.id, reason, now)
	})
}

// snapshot implements section.
func (t *rwTable) snapshot(st *statev1.State) {
	for _, name := range sortedKeys(t.byName) {
		l := t.byName[name]
		pl := &statev1.RWLock{Name: l.name}
		for _, h := range l.holders {
			pl.Holders = append(pl.Holders, &statev1.RWHolder{Session: h.session, Mode: modeOf(h.write), Token: uint64(h.token), IssuedAtUnixMs: h.issuedAt})
		}
		for _, w := range l.queue.list {
			pl.Waiters = append(pl.Waiters, &statev1.RWWaiter{Session: w.session, Seq: w.seq, Mode: modeOf(w.kind == fence.KindWrite)})
		}
		st.Rwlocks = append(st.Rwlocks, pl)
	}
}

// restore implements section.
func (t *rwTable) restore(st *statev1.State) error {
	for _, pl := range st.GetRwlocks() {
		l := &rwlock{name: pl.GetName()}
		for _, ph := range pl.GetHolders() {
			write, err := validateMode(ph.GetMode())
			if err != nil {
				return fmt.Errorf("read/write lock %q: holder %d: %w", l.name, ph.GetSession(), err)
			}
			s := t.m.sessions[ph.GetSession()]
			if s == nil {
				return fmt.Errorf("read/write lock %q is held by unknown session %d", l.name, ph.GetSession())
			}
			s.hold(kindRWLock, l.name)
			l.holders = append(l.holders, rwHolder{session: ph.GetSession(), write: write, token: fence.Token(ph.GetToken()), issuedAt: ph.GetIssuedAtUnixMs()})
		}
		for _, pw := range pl.GetWaiters() {
			write, err := validateMode(pw.GetMode())
			if err != nil {
				return fmt.Errorf("read/write lock %q: waiter %d: %w", l.name, pw.GetSession(), err)
			}
			s := t.m.sessions[pw.GetSession()]
			if s == nil {
				return fmt.Errorf("read/write lock %q has unknown waiter session %d", l.name, pw.GetSession())
			}
			s.wait(kindRWLock, l.name)
			l.queue.list = append(l.queue.list, waiter{session: pw.GetSession(), seq: pw.GetSeq(), kind: rwKind(write)})
		}
		t.byName[l.name] = l
	}
	return nil
}

// eachGrant implements primitive.
func (t *rwTable) eachGrant(fn func(tok fence.Token, g liveGrant)) {
	for _, l := range t.byName {
		for _, h := range l.holders {
			fn(h.token, liveGrant{kind: kindCode(rwKind(h.write)), name: l.name, scope: l.name, session: h.session, issuedAt: h.issuedAt})
		}
	}
}

// RWLock describes one read/write lock; one in no use reports no holders
// and no waiters.
func (m *Machine) RWLock(name string) RWLockInfo {
	t := m.rwlocks
	l := t.byName[name]
	if l == nil {
		return RWLockInfo{Name: name}
	}
	info := RWLockInfo{Name: name}
	for _, h := range l.holders {
		if h.write {
			info.Writer = t.grantOf(l, h)
		} else {
			info.Readers = append(info.Readers, t.grantOf(l, h))
		}
	}
	for _, w := range l.queue.list {
		info.Waiters = append(info.Waiters, RWWaiter{Session: w.session, Write: w.kind == fence.KindWrite})
	}
	return info
}

// RWCounts returns the read grants held, the write grants held and the
// queued requests over all read/write locks.
func (m *Machine) RWCounts() (readers, writers, waiters int) {
	for _, l := range m.rwlocks.byName {
		if l.hasWriter() {
			writers++
		} else {
			readers += len(l.holders)
		}
		waiters += l.queue.len()
	}
	return readers, writers, waiters
}

// check reports a read/write lock whose holders or waiters are not live
// sessions bound to it, a writer with anyone else, holders out of token
// order or with a token above the counter, a session holding twice or
// waiting while it holds, a waiter without its mode, a head of the queue
// that should have been admitted (unless no token is left), an idle lock
// kept, or a session bound to a lock that does not list it.
func (t *rwTable) check() error {
	m := t.m
	for name, l := range t.byName {
		switch {
		case l.name != name:
			return broken("read/write lock %q is filed under %q", l.name, name)
		case storedName(name) != nil:
			return broken("read/write lock %q: %v", name, storedName(name))
		case len(l.holders) == 0 && l.queue.len() == 0:
			return broken("read/write lock %q has no holders and no waiters but is kept", name)
		}
		var prev fence.Token
		held := make(map[uint64]bool, len(l.holders))
		for _, h := range l.holders {
			s := m.sessions[h.session]
			switch {
			case h.write && len(l.holders) > 1:
				return broken("read/write lock %q has a writer (session %d) with %d other holders", name, h.session, len(l.holders)-1)
			case s == nil:
				return broken("read/write lock %q is held by session %d, which is not live", name, h.session)
			case held[h.session]:
				return broken("session %d holds read/write lock %q twice", h.session, name)
			case h.token <= prev || h.token > m.tokens.last:
				return broken("read/write lock %q: holder %d has token %d; want above %d (the holder before) and up to the last token %d", name, h.session, h.token, prev, m.tokens.last)
			}
			if !s.bound(kindRWLock).held.has(name) {
				return broken("read/write lock %q is held by session %d, which is not bound to it", name, h.session)
			}
			held[h.session], prev = true, h.token
		}
		queued := make(map[uint64]bool, l.queue.len())
		for _, w := range l.queue.list {
			s := m.sessions[w.session]
			switch {
			case s == nil:
				return broken("session %d waits for read/write lock %q but is not live", w.session, name)
			case queued[w.session] || held[w.session]:
				return broken("session %d waits for read/write lock %q twice or while it holds it", w.session, name)
			case w.kind != fence.KindRead && w.kind != fence.KindWrite:
				return broken("session %d waits for read/write lock %q for a grant of kind %q", w.session, name, w.kind)
			}
			if !s.bound(kindRWLock).waiting.has(name) {
				return broken("session %d waits for read/write lock %q but is not bound to it", w.session, name)
			}
			queued[w.session] = true
		}
		if l.queue.len() > 0 && !m.tokens.exhausted() && l.compatible(l.queue.list[0].kind == fence.KindWrite) {
			return broken("read/write lock %q: the first waiter, session %d, could be admitted but waits", name, l.queue.list[0].session)
		}
	}
	for _, s := range m.checked.others {
		id, b := s.id, s.bound(kindRWLock)
		for name := range b.held.all() {
			if _, ok := t.byName[name].holderOf(id); !ok {
				return broken("session %d is bound as holder of read/write lock %q, which it does not hold", id, name)
			}
		}
		for name := range b.waiting.all() {
			if l := t.byName[name]; l == nil || !l.queue.has(id) {
				return broken("session %d is bound as waiter of read/write lock %q, which does not queue it", id, name)
			}
		}
	}
	return nil
}
