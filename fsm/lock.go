package fsm

import (
	"fmt"
	"sort"
	"strings"
	"time"

	fence "github.com/fenced-dev/fenced"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// lock is an exclusive lock: its holder and token, and the sessions waiting
// for it in arrival order. A lock that is free with no waiters is deleted.
type lock struct {
	name     string
	holder   uint64 // 0 when free
	token    fence.Token
	issuedAt int64
	waiters  []waiter
}

// waiter is a queued acquire: the session and the seq of the request that
// queued it, so the grant can be recorded as that request's result.
type waiter struct {
	session uint64
	seq     uint64
}

// LockInfo describes a lock.
type LockInfo struct {
	// Name is the lock's name.
	Name string
	// Holder is the current grant; its Token is 0 when the lock is free.
	Holder fence.Grant
	// Waiters are the queued sessions in the order they will be granted.
	Waiters []uint64
}

// Held reports whether the lock has a holder.
func (i LockInfo) Held() bool { return i.Holder.Token != 0 }

func (l *lock) removeWaiter(session uint64) bool {
	for i, w := range l.waiters {
		if w.session == session {
			l.waiters = append(l.waiters[:i], l.waiters[i+1:]...)
			return true
		}
	}
	return false
}

func (m *Machine) dropIfIdle(name string) {
	if l := m.locks[name]; l != nil && l.holder == 0 && len(l.waiters) == 0 {
		delete(m.locks, name)
	}
}

func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

func (m *Machine) acquire(a *statev1.Acquire, now int64) Result {
	name := a.GetName()
	if err := fence.ValidateName(name); err != nil {
		return Result{Err: err}
	}
	if m.issuer == "" {
		return Result{Err: fmt.Errorf("%w: the cluster is not initialised yet; retry", fence.ErrNotLeader)}
	}
	if m.lastToken >= fence.MaxToken {
		_, err := m.nextToken()
		return Result{Err: err}
	}
	sid, seq, created := a.GetSession(), a.GetSeq(), false
	if sid == 0 {
		if err := validateSession(a.GetRequestId(), a.GetTtlMs()); err != nil {
			return Result{Err: err}
		}
		res := m.createSession(a.GetRequestId(), a.GetTtlMs())
		created = m.sessions[res.Session].replies.empty()
		sid, seq = res.Session, 1
	}
	s := m.sessions[sid]
	if s == nil {
		return Result{Err: fmt.Errorf("%w: session %d does not exist (expired, closed or never created); create a new session", fence.ErrSessionNotFound, sid)}
	}
	if seq > 0 {
		rep, ok, err := s.replies.get(seq, name)
		if err != nil {
			return Result{Err: err}
		}
		if ok && rep.kind.isRelease() {
			return Result{Err: fmt.Errorf("%w: request seq %d was already used for a release; every request needs its own seq", fence.ErrInvalidArgument, seq)}
		}
		if ok && rep.kind == replyGranted {
			return Result{Session: sid, Granted: true, Grant: m.grantFromReply(s, rep)}
		}
		if ok && rep.kind == replyWithdrawn {
			return Result{Err: fmt.Errorf("%w: request seq %d was withdrawn by a release; every request needs its own seq", fence.ErrInvalidArgument, seq)}
		}
	}
	l := m.locks[name]
	if l == nil {
		l = &lock{name: name}
		m.locks[name] = l
	}
	switch {
	case l.holder == 0:
		tok, _ := m.nextToken() // overflow was checked above
		l.holder, l.token, l.issuedAt = sid, tok, now
		s.held[name] = struct{}{}
		g := m.grantOf(l)
		s.replies.put(reply{seq: seq, kind: replyGranted, name: name, token: tok, issuedAt: now})
		m.obs.Granted(g)
		return Result{Session: sid, Granted: true, Grant: g}
	case l.holder == sid:
		s.replies.put(reply{seq: seq, kind: replyGranted, name: name, token: l.token, issuedAt: l.issuedAt})
		return Result{Session: sid, Granted: true, Grant: m.grantOf(l)}
	case a.GetWait():
		if _, waiting := s.waiting[name]; !waiting {
			l.waiters = append(l.waiters, waiter{session: sid, seq: seq})
			s.waiting[name] = struct{}{}
		}
		s.replies.put(reply{seq: seq, kind: replyQueued, name: name, holder: l.holder})
		return Result{Session: sid, Queued: true, Holder: l.holder}
	default:
		holder := l.holder
		s.replies.put(reply{seq: seq, kind: replyNotGranted, name: name, holder: holder})
		if created {
			m.endSession(sid, OneShotUnused, now)
		}
		return Result{Session: sid, Holder: holder}
	}
}

func (m *Machine) grantFromReply(s *session, r reply) fence.Grant {
	return fence.Grant{
		Name:     r.name,
		Token:    r.token,
		Issuer:   m.issuer,
		Session:  s.id,
		TTL:      msDuration(s.ttlMs),
		IssuedAt: time.UnixMilli(r.issuedAt).UTC(),
	}
}

func (m *Machine) release(r *statev1.Release, now int64) Result {
	name, sid, seq := r.GetName(), r.GetSession(), r.GetSeq()
	if err := fence.ValidateName(name); err != nil {
		return Result{Err: err}
	}
	if sid == 0 && r.GetRequestId() != "" {
		return m.withdrawPerGrant(r, now)
	}
	s := m.sessions[sid]
	if s != nil && seq > 0 {
		rep, ok, err := s.replies.get(seq, name)
		if err != nil {
			return Result{Err: err}
		}
		if ok && !rep.kind.isRelease() {
			return Result{Err: fmt.Errorf("%w: request seq %d was already used for an acquire; every request needs its own seq", fence.ErrInvalidArgument, seq)}
		}
		if ok {
			return Result{Session: sid, Release: rep.kind.release()}
		}
	}
	if w := r.GetWithdrawSeq(); w != 0 {
		return m.withdraw(s, sid, seq, w, name, now)
	}
	l := m.locks[name]
	var out ReleaseResult
	switch {
	case l == nil:
		out = AlreadyReleased
	case l.holder == sid:
		m.releaseHeld(l, Unlocked, now)
		out = Released
	default:
		if s != nil && l.removeWaiter(sid) {
			delete(s.waiting, name)
			m.obs.WaitEnded(name, sid)
			m.dropIfIdle(name)
		}
		out = AlreadyReleased
		if l.holder != 0 {
			out = NotOwned
		}
	}
	if s != nil {
		s.replies.put(reply{seq: seq, kind: releaseReply(out), name: name})
	}
	return Result{Session: sid, Release: out}
}

// releaseHeld frees l and grants it to the first waiter, if any.
func (m *Machine) releaseHeld(l *lock, reason EndReason, now int64) {
	if s := m.sessions[l.holder]; s != nil {
		delete(s.held, l.name)
	}
	m.obs.Released(l.name, l.holder, l.token, reason)
	l.holder, l.token, l.issuedAt = 0, 0, 0
	if len(l.waiters) > 0 && m.lastToken < fence.MaxToken {
		w := l.waiters[0]
		l.waiters = l.waiters[1:]
		ws := m.sessions[w.session]
		delete(ws.waiting, l.name)
		tok, _ := m.nextToken()
		l.holder, l.token, l.issuedAt = w.session, tok, now
		ws.held[l.name] = struct{}{}
		ws.replies.promote(w.seq, tok, now)
		m.obs.Granted(m.grantOf(l))
		return
	}
	m.dropIfIdle(l.name)
}

func (m *Machine) cancelWait(sid uint64, name string) Result {
	l := m.locks[name]
	if l == nil {
		return Result{Session: sid}
	}
	if l.holder == sid {
		return Result{Session: sid, Granted: true, Grant: m.grantOf(l)}
	}
	if s := m.sessions[sid]; s != nil && l.removeWaiter(sid) {
		delete(s.waiting, name)
		m.obs.WaitEnded(name, sid)
	}
	holder := l.holder
	m.dropIfIdle(name)
	return Result{Session: sid, Holder: holder}
}

// Lock describes one lock; a free lock without waiters reports a zero Holder.
func (m *Machine) Lock(name string) LockInfo {
	l := m.locks[name]
	if l == nil {
		return LockInfo{Name: name}
	}
	return m.lockInfo(l)
}

func (m *Machine) lockInfo(l *lock) LockInfo {
	info := LockInfo{Name: l.name, Waiters: make([]uint64, len(l.waiters))}
	if l.holder != 0 {
		info.Holder = m.grantOf(l)
	}
	for i, w := range l.waiters {
		info.Waiters[i] = w.session
	}
	return info
}

// Locks returns up to limit locks whose names start with prefix, sorted by
// name. limit <= 0 means no limit.
func (m *Machine) Locks(prefix string, limit int) []LockInfo {
	names := make([]string, 0, len(m.locks))
	for name := range m.locks {
		if strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	if limit > 0 && len(names) > limit {
		names = names[:limit]
	}
	out := make([]LockInfo, len(names))
	for i, name := range names {
		out[i] = m.lockInfo(m.locks[name])
	}
	return out
}

// WaiterCount returns the number of queued acquires over all locks.
func (m *Machine) WaiterCount() int {
	n := 0
	for _, l := range m.locks {
		n += len(l.waiters)
	}
	return n
}

// HeldCount returns the number of held locks.
func (m *Machine) HeldCount() int {
	n := 0
	for _, l := range m.locks {
		if l.holder != 0 {
			n++
		}
	}
	return n
}
