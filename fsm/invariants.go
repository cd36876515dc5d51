package fsm

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	fence "github.com/fenced-dev/fenced"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// The rules every state reached by applying commands keeps. Restore checks
// them, so a snapshot that decodes but describes a state no sequence of
// commands could reach (a damaged or forged one) is refused rather than
// served; the property and fuzz tests check them after every command.
//
// Names and node registrations are checked against the rules of every
// version so far, not today's (storedName, nodeTable.check): a lock name or
// kv key with an invisible format character, or a registration with a
// malformed address, was accepted before issue 11 and may live on in a
// snapshot (a kv tombstone lives for good), so refusing it here would keep
// the node from starting after an upgrade. The commands refuse them now.

// errInvariant marks a broken invariant.
var errInvariant = errors.New("state breaks an invariant")

func broken(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errInvariant, fmt.Sprintf(format, args...))
}

// checkRestored checks a state just restored from st: nothing in st was
// lost to a repeated key, and the invariants hold.
func (m *Machine) checkRestored(st *statev1.State) error {
	for _, c := range []struct {
		what      string
		sent, got int
	}{
		{"sessions", len(st.GetSessions()), len(m.sessions)},
		{"locks", len(st.GetLocks()), len(m.locks.byName)},
		{"semaphores", len(st.GetSemaphores()), len(m.semaphores.byName)},
		{"elections", len(st.GetElections()), len(m.elections.byName)},
		{"read/write locks", len(st.GetRwlocks()), len(m.rwlocks.byName)},
		{"kv entries", len(st.GetKv()), len(m.kv.entries)},
		{"nodes", len(st.GetNodes()), len(m.nodes)},
		{"queues", len(st.GetQueues()), len(m.queues.byName)},
	} {
		if c.sent != c.got {
			return broken("the snapshot lists %d %s but only %d distinct ones", c.sent, c.what, c.got)
		}
	}
	seen := make(map[string]bool, len(st.GetKvReplies()))
	for _, r := range st.GetKvReplies() {
		if seen[r.GetRequestId()] {
			return broken("the snapshot lists kv request id %q twice", r.GetRequestId())
		}
		seen[r.GetRequestId()] = true
	}
	return m.invariants(false)
}

// checkInvariants returns the first invariant the state breaks, or nil.
func (m *Machine) checkInvariants() error { return m.invariants(true) }

// invariants is checkInvariants, with the check of the live-grant index
// only when live is set: a restore rebuilt the index from the primitives
// themselves, refusing two grants of one token (rebuildLive), so it holds
// exactly their grants.
func (m *Machine) invariants(live bool) error {
	last := m.tokens.last
	if last > fence.MaxToken {
		return broken("last token %d is above the maximum %d", last, fence.MaxToken)
	}
	// Init sets the issuer before anything else can happen: no issuer, no
	// token issued (a kv write needs a token up to the counter), no session.
	if m.issuer == "" && (last != 0 || m.lastSession != 0 || len(m.sessions) > 0 || len(m.locks.byName) > 0 || len(m.kv.entries) > 0) {
		return broken("the state has tokens, sessions, locks or kv entries but no issuer")
	}
	checkLive := m.checkLive
	if !live {
		checkLive = func() error { return nil }
	}
	m.checked = m.passSessions()
	defer func() { m.checked = sessionPass{} }()
	return firstBroken(m.size() >= parallelCheckSize,
		m.checkSessions, m.locks.check, m.semaphores.check, m.elections.check,
		m.rwlocks.check, m.queues.check, checkLive, m.kv.check, m.nodes.check)
}

// sessionPass is what one walk of the sessions gathers for the checks,
// which then need no walk of their own (each a random read of a million
// sessions, at scale): the sessions bound in a primitive other than the
// lock (session.others: any other session's bindings there are empty),
// and the number of lock bindings.
type sessionPass struct {
	others                []*session
	lockHeld, lockWaiting int
}

// passSessions walks the sessions once for the checks.
func (m *Machine) passSessions() sessionPass {
	var p sessionPass
	for _, s := range m.sessions {
		if s.others != nil {
			p.others = append(p.others, s)
		}
		p.lockHeld += s.lock.held.len()
		p.lockWaiting += s.lock.waiting.len()
	}
	return p
}

// parallelCheckSize is the state size (sessions, locks and kv entries) from
// which the invariant checks run side by side: a restore of a large
// snapshot spends most of its time in them.
const parallelCheckSize = 10000

// size is the number of sessions, locks and kv entries.
func (m *Machine) size() int { return len(m.sessions) + len(m.locks.byName) + len(m.kv.entries) }

// firstBroken runs the checks, one after the other or each on a goroutine
// of its own (they only read the state), and returns the error of the
// first in order that failed, so the answer does not depend on which
// finished first.
func firstBroken(parallel bool, checks ...func() error) error {
	errs := make([]error, len(checks))
	if parallel {
		var wg sync.WaitGroup
		for i, check := range checks {
			wg.Go(func() { errs[i] = check() })
		}
		wg.Wait()
	} else {
		for i, check := range checks {
			if errs[i] = check(); errs[i] != nil {
				break
			}
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (m *Machine) checkSessions() error {
	if len(m.byRequest) > len(m.sessions) {
		return broken("%d request ids for %d sessions", len(m.byRequest), len(m.sessions))
	}
	withRequest := 0
	for id, s := range m.sessions {
		if s.requestID != "" {
			withRequest++
		}
		switch {
		case id == 0 || s.id != id:
			return broken("session %d is filed under id %d", s.id, id)
		case id > m.lastSession:
			return broken("session %d is above the last session id %d", id, m.lastSession)
		case len(s.requestID) > maxRequestIDLen:
			return broken("session %d has a request id of %d bytes", id, len(s.requestID))
		case s.requestID != "" && m.byRequest[s.requestID] != id:
			return broken("session %d's request id %q maps to session %d", id, s.requestID, m.byRequest[s.requestID])
		}
		if err := fence.ValidateTTLMillis(s.ttl()); err != nil {
			return broken("session %d: %v", id, err)
		}
		if err := s.replies.check(m.tokens.last); err != nil {
			return broken("session %d: %v", id, err)
		}
	}
	// Every session's request id maps to it, so those are as many
	// distinct entries of byRequest: as many in all means byRequest holds
	// nothing else, without a look-up of its every entry (random reads of
	// a million sessions, at scale).
	if len(m.byRequest) != withRequest {
		for rid, id := range m.byRequest {
			if s := m.sessions[id]; s == nil || s.requestID != rid {
				return broken("request id %q maps to session %d, which does not have it", rid, id)
			}
		}
		return broken("%d request ids for the %d sessions that have one", len(m.byRequest), withRequest)
	}
	return nil
}

// check reports replies out of order, at or below the floor, more than the
// window, with a token above last, or a claim's with an ack outcome
// (kept in its holder field) that no ack has.
func (r *replies) check(last fence.Token) error {
	if len(r.list) > replyWindow {
		return fmt.Errorf("%d remembered replies, more than %d", len(r.list), replyWindow)
	}
	prev := r.floor
	for _, rep := range r.list {
		switch {
		case rep.seq <= prev:
			return fmt.Errorf("reply seq %d is not above %d (the floor or the previous seq)", rep.seq, prev)
		case rep.kind < replyGranted || rep.kind > replyLast:
			return fmt.Errorf("reply seq %d has unknown kind %d", rep.seq, rep.kind)
		case rep.token > last:
			return fmt.Errorf("reply seq %d has token %d, above the last token %d", rep.seq, rep.token, last)
		case (rep.kind == replyGranted || rep.kind == replyProclaimed) && rep.token == 0:
			return fmt.Errorf("reply seq %d is a grant without a token", rep.seq)
		case strings.HasPrefix(rep.name, queueReplyPrefix) && !validPackedAcks(rep.holder):
			return fmt.Errorf("claim reply seq %d has packed ack outcomes %#x, which no acks have (an outcome of none below a real one)", rep.seq, rep.holder)
		}
		prev = rep.seq
	}
	return nil
}

// check reports a lock whose holder or waiters are not live sessions bound
// to it, a holder without a token or with one above the counter, two
// holders with one token, a session queued twice or queued behind itself,
// an idle lock kept, or a session bound to a lock that does not list it.
func (t *lockTable) check() error {
	m := t.m
	var tokens []fence.Token // of the held locks, to find one held twice
	queuedAll := 0
	for name, l := range t.byName {
		if l.name != name {
			return broken("lock %q is filed under %q", l.name, name)
		}
		if err := storedName(name); err != nil {
			return broken("lock %q: %v", name, err)
		}
		if l.holder == 0 && l.queue.len() == 0 && !l.delay.pending() {
			return broken("lock %q is free with no waiters and no delay but kept", name)
		}
		if err := l.delay.check(l, m.tokens.last); err != nil {
			return err
		}
		if l.holder == 0 && l.token != 0 {
			return broken("lock %q is free but has token %d", name, l.token)
		}
		if l.holder != 0 {
			s := m.sessions[l.holder]
			switch {
			case s == nil:
				return broken("lock %q is held by session %d, which is not live", name, l.holder)
			case !l.token.Valid() || l.token > m.tokens.last:
				return broken("lock %q has token %d; want 1 to the last token %d", name, l.token, m.tokens.last)
			}
			if !s.bound(kindLock).held.has(name) {
				return broken("lock %q is held by session %d, which is not bound to it", name, l.holder)
			}
			tokens = append(tokens, l.token)
		}
		queuedAll += l.queue.len()
		var queued map[uint64]bool // made for a lock with waiters only
		if l.queue.len() > 0 {
			queued = make(map[uint64]bool, l.queue.len())
		}
		for _, w := range l.queue.list {
			s := m.sessions[w.session]
			switch {
			case s == nil:
				return broken("session %d waits for %q but is not live", w.session, name)
			case queued[w.session]:
				return broken("session %d is queued twice for %q", w.session, name)
			case w.session == l.holder:
				return broken("session %d waits for %q, which it holds", w.session, name)
			}
			if !s.bound(kindLock).waiting.has(name) {
				return broken("session %d waits for %q but is not bound to it", w.session, name)
			}
			queued[w.session] = true
		}
	}
	if tok, dup := duplicateToken(tokens); dup {
		var names []string
		for _, name := range sortedKeys(t.byName) {
			if l := t.byName[name]; l.holder != 0 && l.token == tok {
				names = append(names, name)
			}
		}
		return broken("locks %q hold the same token %d", names, tok)
	}
	// Every held lock and every waiter is bound to its session (above),
	// each a distinct (session, name) pair: as many bindings in all as held
	// locks and waiters means there is no other binding, without a look-up
	// of every binding's lock (random reads of a million locks, at
	// scale). Only when the counts differ is the binding found.
	heldAll, waitingAll := m.checked.lockHeld, m.checked.lockWaiting
	if heldAll == len(tokens) && waitingAll == queuedAll {
		return nil
	}
	for _, id := range sortedSessionIDs(m.sessions) {
		b := m.sessions[id].bound(kindLock)
		for name := range b.held.all() {
			if l := t.byName[name]; l == nil || l.holder != id {
				return broken("session %d is bound as holder of %q, which it does not hold", id, name)
			}
		}
		for name := range b.waiting.all() {
			if l := t.byName[name]; l == nil || !l.queue.has(id) {
				return broken("session %d is bound as waiter of %q, which does not queue it", id, name)
			}
		}
	}
	return broken("%d lock bindings as holder and %d as waiter for %d held locks and %d waiters", heldAll, waitingAll, len(tokens), queuedAll)
}

// duplicateToken sorts toks and returns the smallest token in it twice,
// if any: a sort of a million tokens is far cheaper than a map of them.
func duplicateToken(toks []fence.Token) (fence.Token, bool) {
	slices.Sort(toks)
	for i := 1; i < len(toks); i++ {
		if toks[i] == toks[i-1] {
			return toks[i], true
		}
	}
	return 0, false
}

// sortedSessionIDs returns the ids of sessions in order.
func sortedSessionIDs(sessions map[uint64]*session) []uint64 {
	ids := make([]uint64, 0, len(sessions))
	for id := range sessions {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// check reports a kv entry with an invalid key, a value too large, a
// watermark above the counter, a deleted entry with a value, or a
// remembered write with a token above the counter.
func (kv *kvStore) check() error {
	last := kv.m.tokens.last
	for key, e := range kv.entries {
		switch {
		case storedName(key) != nil:
			return broken("kv key %q: %v", key, storedName(key))
		case len(e.value) > MaxValueBytes:
			return broken("kv key %q has a value of %d bytes, above %d", key, len(e.value), MaxValueBytes)
		case !e.token.Valid() || e.token > last:
			return broken("kv key %q has watermark %d; want 1 to the last token %d", key, e.token, last)
		case e.version == 0:
			return broken("kv key %q has version 0", key)
		case !e.exists && e.value != nil:
			return broken("deleted kv key %q has a value", key)
		}
	}
	if len(kv.replies.order) != len(kv.replies.byID) || len(kv.replies.order) > kvReplyWindow {
		return broken("kv replies: %d in order, %d by id (at most %d)", len(kv.replies.order), len(kv.replies.byID), kvReplyWindow)
	}
	for id, r := range kv.replies.byID {
		if len(id) > maxRequestIDLen || id == "" || r.Token > last {
			return broken("kv reply %q is invalid (token %d, last token %d)", id, r.Token, last)
		}
	}
	return nil
}

// storedName checks a name as every version accepted it: 1 to
// fence.MaxNameLen bytes of valid UTF-8 without control characters
// (fence.ValidateName also refuses format characters now).
func storedName(name string) error {
	switch {
	case name == "" || len(name) > fence.MaxNameLen:
		return fmt.Errorf("name is %d bytes; want 1 to %d", len(name), fence.MaxNameLen)
	case !utf8.ValidString(name):
		return errors.New("name is not valid UTF-8")
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return errors.New("name has a control character")
	}
	return nil
}

// check reports a registration without an id or an address (what every
// version refused; ValidateNode bounds them now).
func (t nodeTable) check() error {
	for id, addr := range t {
		if id == "" || addr == "" {
			return broken("node %q registered at %q: want an id and an address", id, addr)
		}
	}
	return nil
}
