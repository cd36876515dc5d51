package server

import (
	"sync"
	"time"

	fence "github.com/fenced-dev/fenced"
)

// retryExpiryAfter is how long an expiry that was proposed but did not take
// effect waits before it is proposed again.
const retryExpiryAfter = time.Second

// lease is one session's deadline on this node's monotonic clock.
type lease struct {
	ttl      time.Duration
	deadline time.Time
	expiring time.Time // when an expiry was proposed; zero if none
}

// leases is the in-memory lease table. Every node tracks every session
// (started when its creation is applied), but only the leader renews and
// expires: a follower's deadlines are reset when it takes over.
//
// The TTL is a lower bound on a session's life: the deadline is set at the
// earliest when the creating or renewing request arrived, which is after the
// client sent it, so a client measuring from its send time (DESIGN.md §4)
// sees its validity end first.
type leases struct {
	clock fence.Clock
	mu    sync.Mutex
	table map[uint64]*lease
}

func newLeases(clock fence.Clock) *leases {
	return &leases{clock: clock, table: make(map[uint64]*lease)}
}

// start tracks a new session from now.
func (l *leases) start(id uint64, ttl time.Duration) {
	l.mu.Lock()
	l.table[id] = &lease{ttl: ttl, deadline: l.clock.Now().Add(ttl)}
	l.mu.Unlock()
}

// end stops tracking a session.
func (l *leases) end(id uint64) {
	l.mu.Lock()
	delete(l.table, id)
	l.mu.Unlock()
}

// renew extends a session's deadline to now+ttl. It fails for a session
// that is unknown or whose expiry was already proposed: confirming that
// renewal would let the client trust a session the cluster is ending.
func (l *leases) renew(id uint64) (time.Duration, bool) {
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

// restartAll gives every session its full TTL from now, as a new leader
// must: deadlines only move later.
func (l *leases) restartAll() {
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
func (l *leases) due() []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	var ids []uint64
	for id, ls := range l.table {
		if now.Before(ls.deadline) {
			continue
		}
		if !ls.expiring.IsZero() && now.Sub(ls.expiring) < retryExpiryAfter {
			continue
		}
		ls.expiring = now
		ids = append(ids, id)
	}
	return ids
}

// count returns the number of tracked sessions.
func (l *leases) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.table)
}
