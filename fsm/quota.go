package fsm

import (
	"fmt"

	fence "github.com/fenced-dev/fenced"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// Per-owner quotas, and the limits of the whole kv. Every session records
// the identity it is charged to (its owner: the client's source address
// until authentication exists), replicated in the command that created it
// and kept in snapshots, so every replica, and every later leader, counts
// the same sessions, grants and waiters per owner. The limits come with
// each command (statev1.Quota, statev1.KVLimits, set by the proposing
// leader from its flags): a replica never consults its own configuration,
// so replicas configured differently still decide alike. A limit of 0, or
// a command without limits, is no limit.

// usage counts what one owner's live sessions hold: sessions, grants held
// and places in queues, over every primitive.
type usage struct {
	owner    string // the identity charged, the key in Machine.owners
	sessions int
	held     int
	waiting  int
}

// Quota resources, as named in a QuotaError.
const (
	QuotaSessions = "sessions"
	QuotaHeld     = "grants"
	QuotaWaiting  = "waiters"
)

// QuotaError refuses a command that would take an owner past a limit of
// its quota. It matches fence.ErrLimitExceeded with errors.Is.
type QuotaError struct {
	// Owner is the identity charged.
	Owner string
	// Resource is QuotaSessions, QuotaHeld or QuotaWaiting.
	Resource string
	// Limit is the most the owner may have.
	Limit uint32
}

// Error implements error.
func (e *QuotaError) Error() string {
	return fmt.Sprintf("fence: limit exceeded: %s already has %d live %s, the most allowed per source", e.Owner, e.Limit, e.Resource)
}

// Is reports whether target is fence.ErrLimitExceeded.
func (e *QuotaError) Is(target error) bool { return target == fence.ErrLimitExceeded }

// usageOf returns the usage of owner, creating it; nil for no owner.
func (m *Machine) usageOf(owner string) *usage {
	if owner == "" {
		return nil
	}
	u := m.owners[owner]
	if u == nil {
		u = &usage{owner: owner}
		m.owners[owner] = u
	}
	return u
}

// Usage returns the live sessions, held grants and waiters charged to
// owner.
func (m *Machine) Usage(owner string) (sessions, held, waiting int) {
	if u := m.owners[owner]; u != nil {
		return u.sessions, u.held, u.waiting
	}
	return 0, 0, 0
}

// checkSessionQuota refuses a new session for q's owner at its limit.
func (m *Machine) checkSessionQuota(q *statev1.Quota) error {
	if q.GetMaxSessions() == 0 || q.GetOwner() == "" {
		return nil
	}
	if u := m.owners[q.GetOwner()]; u != nil && u.sessions >= int(q.GetMaxSessions()) {
		return &QuotaError{Owner: q.GetOwner(), Resource: QuotaSessions, Limit: q.GetMaxSessions()}
	}
	return nil
}

// checkHoldQuota refuses a new grant (or, waiting, a new place in a queue)
// for session s when its owner is at the limit of q. The session's owner
// is charged, whoever sends the request; the counts span every primitive. A waiter later promoted to holder
// is never refused: it was admitted when it queued, so an owner can hold
// up to its grant limit plus its waiter limit.
func checkHoldQuota(s *session, q *statev1.Quota, waiting bool) error {
	return checkHoldQuotaFreeing(s, q, waiting, 0)
}

// checkHoldQuotaFreeing is checkHoldQuota for a command that ends freed of
// the owner's holds before it takes one (a claim carrying an ack).
func checkHoldQuotaFreeing(s *session, q *statev1.Quota, waiting bool, freed int) error {
	if s.owner() == "" {
		return nil
	}
	u := s.use
	switch {
	case !waiting && q.GetMaxHeld() > 0 && u.held-freed >= int(q.GetMaxHeld()):
		return &QuotaError{Owner: s.owner(), Resource: QuotaHeld, Limit: q.GetMaxHeld()}
	case waiting && q.GetMaxWaiting() > 0 && u.waiting >= int(q.GetMaxWaiting()):
		return &QuotaError{Owner: s.owner(), Resource: QuotaWaiting, Limit: q.GetMaxWaiting()}
	}
	return nil
}

// KVLimitError refuses a kv write that would take the whole kv past one of
// its limits (statev1.KVLimits). It matches fence.ErrLimitExceeded.
type KVLimitError struct {
	// Resource is KVKeys or KVBytes.
	Resource string
	// Limit is the most allowed.
	Limit uint64
}

// KV limit resources, as named in a KVLimitError.
const (
	KVKeys  = "keys"
	KVBytes = "bytes"
)

// Error implements error.
func (e *KVLimitError) Error() string {
	return fmt.Sprintf("fence: limit exceeded: the fenced kv would hold more than %d %s (deleted keys count: they keep their watermark)", e.Limit, e.Resource)
}

// Is reports whether target is fence.ErrLimitExceeded.
func (e *KVLimitError) Is(target error) bool { return target == fence.ErrLimitExceeded }

// checkLimits refuses write w to entry e (new when not in the store) when
// it would take the kv past w's limits. A write that does not grow the kv
// (an overwrite with a value no larger, a delete of an existing key) is
// never refused.
func (kv *kvStore) checkLimits(w *statev1.KVWrite, e *kvEntry) error {
	l := w.GetLimits()
	isNew := kv.entries[w.GetKey()] == nil
	if isNew && l.GetMaxKeys() > 0 && uint64(len(kv.entries)) >= l.GetMaxKeys() {
		return &KVLimitError{Resource: KVKeys, Limit: l.GetMaxKeys()}
	}
	after := kv.bytes - uint64(len(e.value))
	if !w.GetDelete() {
		after += uint64(len(w.GetValue()))
	}
	if isNew {
		after += uint64(len(w.GetKey()))
	}
	if l.GetMaxBytes() > 0 && after > kv.bytes && after > l.GetMaxBytes() {
		return &KVLimitError{Resource: KVBytes, Limit: l.GetMaxBytes()}
	}
	return nil
}
