package server

import (
	"container/heap"
	"sync"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
)

// retryExpiryAfter is how long an expiry that was proposed but did not take
// effect waits before it is proposed again.
const retryExpiryAfter = time.Second

// sessionDeadline is one session's deadline on this node's monotonic
// clock.
type sessionDeadline struct {
	ttl      time.Duration
	deadline time.Time
	expiring time.Time // when an expiry was proposed; zero if none
	pins     int       // renewals in flight (renew.go): no expiry is proposed while > 0
	gen      uint64    // the heap entry of this generation is the live one (renew.go)
}

// sessionExpiry is the in-memory table of session deadlines, from which
// the leader proposes session expiries. Every node tracks every session
// (started when its creation is applied), but only the leader renews and
// expires: a follower's deadlines are reset when it takes over.
//
// The TTL is a lower bound on a session's life: the deadline is set at the
// earliest when the creating or renewing request arrived, which is after the
// client sent it, so a client measuring from its send time (docs/design.md §4)
// sees its validity end first.
//
// Deadlines are kept in a min-heap so that finding the due sessions costs
// nothing while none is due, however many sessions there are. A renewal
// only moves a session's deadline; its heap entry keeps the old one and is
// moved when it comes up (once per TTL at most), so renewals stay O(1).
type sessionExpiry struct {
	clock fence.Clock
	mu    sync.Mutex
	table map[uint64]*sessionDeadline
	queue deadlineHeap // one entry per session in table, at or before its deadline
}

func newSessionExpiry(clock fence.Clock) *sessionExpiry {
	return &sessionExpiry{clock: clock, table: make(map[uint64]*sessionDeadline)}
}

// start tracks a new session from now.
func (l *sessionExpiry) start(id uint64, ttl time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	deadline := l.clock.Now().Add(ttl)
	old, queued := l.table[id]
	l.table[id] = &sessionDeadline{ttl: ttl, deadline: deadline}
	if queued {
		l.table[id].gen = old.gen // its entry stays the live one
	}
	if !queued {
		// A session started again keeps its entry, which is before the new
		// deadline (deadlines are always some now+ttl, and now only grows).
		heap.Push(&l.queue, deadlineEntry{id: id, at: deadline})
	}
}

// end stops tracking a session. Its heap entry is dropped when it comes
// up, or sooner: once the heap holds more than twice the entries of the
// table (and a few), it is rebuilt from the live entries alone. Queue
// claims are tracked here too, one per claim token, and most end (acked)
// long before their deadline: without the rebuild, 20,000 claims a second
// with a 30 s visibility kept 600,000 dead entries that every push had to
// climb past (heap growth and sifting were 4 % of a leader's CPU in a
// profile of the queue batch benchmark).
func (l *sessionExpiry) end(id uint64) {
	l.mu.Lock()
	delete(l.table, id)
	if len(l.queue) > 2*len(l.table)+compactExpiryAbove {
		l.compactLocked()
	}
	l.mu.Unlock()
}

// compactExpiryAbove is how many dead heap entries end lets pile up (past
// one per live entry) before it rebuilds the heap.
const compactExpiryAbove = 1024

// compactLocked drops the heap entries that due would drop when they
// come up: those of ended entries and of older generations.
func (l *sessionExpiry) compactLocked() {
	live := l.queue[:0]
	for _, e := range l.queue {
		if ls := l.table[e.id]; ls != nil && e.gen == ls.gen {
			live = append(live, e)
		}
	}
	clear(l.queue[len(live):])
	l.queue = live
	heap.Init(&l.queue)
}

// renew extends a session's deadline to now+ttl. It fails for a session
// that is unknown or whose expiry was already proposed: confirming that
// renewal would let the client trust a session the cluster is ending.
func (l *sessionExpiry) renew(id uint64) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ls := l.table[id]
	if ls == nil || !ls.expiring.IsZero() {
		return 0, false
	}
	if d := l.clock.Now().Add(ls.ttl); d.After(ls.deadline) {
		ls.deadline = d
	}
	return ls.ttl, true
}

// reset replaces the whole table with sessions, each tracked from now
// with its full TTL: a restored snapshot replaced the state, and the
// sessions it holds were created by entries this node will never apply.
// The TTL stays a lower bound on each session's life.
func (l *sessionExpiry) reset(sessions []fsm.SessionTTL) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	l.table = make(map[uint64]*sessionDeadline, len(sessions))
	l.queue = make(deadlineHeap, 0, len(sessions))
	for _, si := range sessions {
		ttl := time.Duration(si.TTLMs) * time.Millisecond
		l.table[si.ID] = &sessionDeadline{ttl: ttl, deadline: now.Add(ttl)}
		l.queue = append(l.queue, deadlineEntry{id: si.ID, at: now.Add(ttl)})
	}
	heap.Init(&l.queue)
}

// restartAll gives every session its full TTL from now, as a new leader
// must: deadlines only move later, so the heap entries stay valid.
func (l *sessionExpiry) restartAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	for _, ls := range l.table {
		ls.expiring = time.Time{}
		if d := now.Add(ls.ttl); d.After(ls.deadline) {
			ls.deadline = d
		}
	}
}

// due marks and returns the sessions whose deadline has passed and whose
// expiry has not been proposed in the last retryExpiryAfter.
func (l *sessionExpiry) due() []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	var ids []uint64
	for len(l.queue) > 0 && !now.Before(l.queue[0].at) {
		e := heap.Pop(&l.queue).(deadlineEntry)
		ls := l.table[e.id]
		switch {
		case ls == nil || e.gen != ls.gen:
			// Ended, or a retime queued a newer entry; drop this one.
		case now.Before(ls.deadline):
			// Renewed since the entry was queued.
			heap.Push(&l.queue, deadlineEntry{id: e.id, at: ls.deadline, gen: ls.gen})
		case ls.pins > 0:
			// A renewal is being applied; look again shortly.
			heap.Push(&l.queue, deadlineEntry{id: e.id, at: now.Add(pinnedRecheck), gen: ls.gen})
		case !ls.expiring.IsZero() && now.Sub(ls.expiring) < retryExpiryAfter:
			heap.Push(&l.queue, deadlineEntry{id: e.id, at: ls.expiring.Add(retryExpiryAfter), gen: ls.gen})
		default:
			ls.expiring = now
			ids = append(ids, e.id)
			heap.Push(&l.queue, deadlineEntry{id: e.id, at: now.Add(retryExpiryAfter), gen: ls.gen})
		}
	}
	return ids
}

// count returns the number of tracked sessions.
func (l *sessionExpiry) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.table)
}

// deadlineEntry is a session's place in the deadline heap.
type deadlineEntry struct {
	id  uint64
	at  time.Time
	gen uint64 // sessionDeadline.gen when queued
}

// deadlineHeap is a container/heap of entries, earliest first.
type deadlineHeap []deadlineEntry

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h deadlineHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *deadlineHeap) Push(x any)        { *h = append(*h, x.(deadlineEntry)) }
func (h *deadlineHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// sinceRenewal returns how long ago the session's deadline was last set
// (its creation or last renewal on this node), and false for a session it
// does not track.
func (l *sessionExpiry) sinceRenewal(id uint64) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ls := l.table[id]
	if ls == nil {
		return 0, false
	}
	return l.clock.Now().Sub(ls.deadline.Add(-ls.ttl)), true
}
