package server

import (
	"container/heap"
	"math"
	"sync"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
)

// retryExpiryAfter is how long an expiry that was proposed but did not take
// effect waits before it is proposed again.
const retryExpiryAfter = time.Second

// sessionDeadline is one session's deadline on this node's monotonic
// clock. It holds no pointer, and the table holds it by value, so a
// million sessions are one allocation the collector never scans
// (docs/benchmarks.md, "The cost of scale"): times are nanoseconds on the
// table's own scale (sessionExpiry.at).
type sessionDeadline struct {
	deadline monoTime
	expiring monoTime // when an expiry was proposed; 0 if none
	ttl      ttlMs
	pins     int32  // renewals in flight (renew.go): no expiry is proposed while > 0
	gen      uint32 // the heap entry of this generation is the live one (renew.go)
	// stream is the KeepAlive stream that renewed the session last, told
	// at once if it is revoked (revokePush); 0 if none. Kept here, where a
	// renewal already looks the session up, rather than in a registry of
	// its own (95 MB at a million sessions).
	stream uint32
}

// ttlMs is a TTL in whole milliseconds, in 32 bits (the record stays 32
// bytes with sessionDeadline.stream): every session TTL and claim
// visibility is given in milliseconds and is at most fence.MaxTTL.
type ttlMs int32

// toTTLMs returns d in milliseconds, rounded up (a TTL is a lower bound on
// the life of what it times) and at most the largest ttlMs.
func toTTLMs(d time.Duration) ttlMs {
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return ttlMs(min(max(ms, 0), math.MaxInt32))
}

// duration returns t as a Duration.
func (t ttlMs) duration() time.Duration { return time.Duration(t) * time.Millisecond }

// monoTime is an instant as the nanoseconds since the table's base, plus
// one, so that 0 is no instant (sessionDeadline.expiring).
type monoTime int64

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
	base  time.Time // the instant monoTime counts from
	mu    sync.Mutex
	table map[uint64]sessionDeadline
	queue deadlineHeap // one entry per session in table, at or before its deadline
}

func newSessionExpiry(clock fence.Clock) *sessionExpiry {
	// The scale starts before now by more than retryExpiryAfter, so that
	// now minus it is an instant too (expireNow).
	return &sessionExpiry{clock: clock, base: clock.Now().Add(-2 * retryExpiryAfter), table: make(map[uint64]sessionDeadline)}
}

// now returns the clock's now on the table's scale.
func (l *sessionExpiry) now() monoTime { return monoTime(l.clock.Now().Sub(l.base)) + 1 }

// add returns t+d.
func (t monoTime) add(d time.Duration) monoTime { return t + monoTime(d) }

// sub returns t-u.
func (t monoTime) sub(u monoTime) time.Duration { return time.Duration(t - u) }

// start tracks a new session from now.
func (l *sessionExpiry) start(id uint64, ttl time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	deadline := l.now().add(ttl)
	old, queued := l.table[id]
	ls := sessionDeadline{ttl: toTTLMs(ttl), deadline: deadline}
	if queued {
		ls.gen = old.gen // its entry stays the live one
	}
	l.table[id] = ls
	if !queued {
		// A session started again keeps its entry, which is before the new
		// deadline (deadlines are always some now+ttl, and now only grows).
		heap.Push(&l.queue, deadlineEntry{id: id, at: deadline})
	}
}

// end stops tracking a session, and returns the KeepAlive stream that
// renewed it last (0 if none). Its heap entry is dropped when it comes
// up, or sooner: once the heap holds more than twice the entries of the
// table (and a few), it is rebuilt from the live entries alone. Queue
// claims are tracked here too, one per claim token, and most end (acked)
// long before their deadline: without the rebuild, 20,000 claims a second
// with a 30 s visibility kept 600,000 dead entries that every push had to
// climb past (heap growth and sifting were 4 % of a leader's CPU in a
// profile of the queue batch benchmark).
func (l *sessionExpiry) end(id uint64) (stream uint32) {
	l.mu.Lock()
	stream = l.table[id].stream
	delete(l.table, id)
	if len(l.queue) > 2*len(l.table)+compactExpiryAbove {
		l.compactLocked()
	}
	l.mu.Unlock()
	return stream
}

// compactExpiryAbove is how many dead heap entries end lets pile up (past
// one per live entry) before it rebuilds the heap.
const compactExpiryAbove = 1024

// compactLocked drops the heap entries that due would drop when they
// come up: those of ended entries and of older generations.
func (l *sessionExpiry) compactLocked() {
	live := l.queue[:0]
	for _, e := range l.queue {
		if ls, ok := l.table[e.id]; ok && e.gen == ls.gen {
			live = append(live, e)
		}
	}
	clear(l.queue[len(live):])
	l.queue = live
	heap.Init(&l.queue)
}

// renew extends a session's deadline to now+ttl, renewed on the
// KeepAlive stream numbered stream (revokePush; 0 for none, which leaves
// the last one registered). It fails for a session that is unknown or
// whose expiry was already proposed: confirming that renewal would let
// the client trust a session the cluster is ending.
func (l *sessionExpiry) renew(id uint64, stream uint32) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ls, ok := l.table[id]
	if !ok || ls.expiring != 0 {
		return 0, false
	}
	if d := l.now().add(ls.ttl.duration()); d > ls.deadline {
		ls.deadline = d
	}
	if stream != 0 {
		ls.stream = stream
	}
	l.table[id] = ls
	return ls.ttl.duration(), true
}

// reset replaces the whole table with sessions, each tracked from now
// with its full TTL: a restored snapshot replaced the state, and the
// sessions it holds were created by entries this node will never apply.
// The TTL stays a lower bound on each session's life.
func (l *sessionExpiry) reset(sessions []fsm.SessionTTL) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.table = make(map[uint64]sessionDeadline, len(sessions))
	l.queue = make(deadlineHeap, 0, len(sessions))
	for _, si := range sessions {
		ttl := time.Duration(si.TTLMs) * time.Millisecond
		l.table[si.ID] = sessionDeadline{ttl: toTTLMs(ttl), deadline: now.add(ttl)}
		l.queue = append(l.queue, deadlineEntry{id: si.ID, at: now.add(ttl)})
	}
	heap.Init(&l.queue)
}

// restartAll gives every session its full TTL from now, as a new leader
// must: deadlines only move later, so the heap entries stay valid.
func (l *sessionExpiry) restartAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	for id, ls := range l.table {
		ls.expiring = 0
		if d := now.add(ls.ttl.duration()); d > ls.deadline {
			ls.deadline = d
		}
		l.table[id] = ls
	}
}

// due marks and returns the sessions whose deadline has passed and whose
// expiry has not been proposed in the last retryExpiryAfter.
func (l *sessionExpiry) due() []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	var ids []uint64
	for len(l.queue) > 0 && now >= l.queue[0].at {
		e := &l.queue[0]
		ls, ok := l.table[e.id]
		// An entry that stays is moved to its new time where it is
		// (heap.Fix), not popped and pushed again.
		switch {
		case !ok || e.gen != ls.gen:
			// Ended, or a retime queued a newer entry; drop this one.
			heap.Pop(&l.queue)
			continue
		case now < ls.deadline:
			// Renewed since the entry was queued.
			e.at = ls.deadline
		case ls.pins > 0:
			// A renewal is being applied; look again shortly.
			e.at = now.add(pinnedRecheck)
		case ls.expiring != 0 && now.sub(ls.expiring) < retryExpiryAfter:
			e.at = ls.expiring.add(retryExpiryAfter)
		default:
			ls.expiring = now
			l.table[e.id] = ls
			ids = append(ids, e.id)
			e.at = now.add(retryExpiryAfter)
		}
		heap.Fix(&l.queue, 0)
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
	at  monoTime
	gen uint32 // sessionDeadline.gen when queued
}

// deadlineHeap is a container/heap of entries, earliest first.
type deadlineHeap []deadlineEntry

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].at < h[j].at }
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
	ls, ok := l.table[id]
	if !ok {
		return 0, false
	}
	return l.now().sub(ls.deadline.add(-ls.ttl.duration())), true
}
