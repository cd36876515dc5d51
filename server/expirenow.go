package server

import (
	"container/heap"
	"context"
	"fmt"
	"time"

	fence "github.com/fenced-dev/fenced"
)

// ExpireSession ends a session as if its TTL had run out, through the
// normal expiry path: the leader's expiry loop proposes the expiry (its
// renewals are refused from now on), the state machine applies it, its
// locks go to their next waiters with higher tokens, and its client learns
// of it when its next renewal is refused. It returns once the expiry is
// applied on this node, or with ctx's error. It works on the leader only.
//
// It is for tests that make a holder's lease run out on demand (package
// fencedtest); no API call reaches it.
func (s *Server) ExpireSession(ctx context.Context, id uint64) error {
	if !s.node.IsLeader() {
		return fmt.Errorf("expire session %d: %w", id, fence.ErrNotLeader)
	}
	if !s.expiry.expireNow(id) {
		return fmt.Errorf("expire session %d: %w", id, fence.ErrSessionNotFound)
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for s.expiry.tracks(id) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("expire session %d: %w", id, ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

// expireNow makes a tracked session due at once and refuses its
// renewals from now on; false if the session is not tracked.
func (l *sessionExpiry) expireNow(id uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	ls, ok := l.table[id]
	if !ok {
		return false
	}
	now := l.now()
	ls.deadline = now
	// Marked as expiring (so renew refuses it) long enough ago that due
	// proposes its expiry at once rather than waiting for a retry. (Not
	// 0, which is no expiry: the table's scale starts at 1 and a retry
	// after 1 ns is as soon.)
	ls.expiring = max(now.add(-retryExpiryAfter), 1)
	l.table[id] = ls
	heap.Push(&l.queue, deadlineEntry{id: id, at: now, gen: ls.gen})
	return true
}

// tracks reports whether the session is still tracked (not yet ended).
func (l *sessionExpiry) tracks(id uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.table[id]
	return ok
}
