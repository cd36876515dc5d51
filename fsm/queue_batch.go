package fsm

import (
	"errors"
	"fmt"
	"slices"

	fence "github.com/fenced-dev/fenced"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// Batches of the work queue (docs/queue.md, "Batches"): a push batch
// enqueues several items of one queue in one command, all or none; a
// batch claim (QueueClaim.max_items) claims up to max_items available
// items, each with its own claim token from the one counter, consecutive
// and so increasing; the acks a claim carries (QueueClaim.acks) and an ack
// batch ack several items, each with its own outcome. One command is one
// Raft entry and one apply, so a batch costs about one call's overhead.

// MaxQueueBatch bounds every batch: the pushes of a push batch, the items
// of a batch claim, the acks of a claim or an ack batch. The outcomes of a
// claim's acks are kept in its reply, two bits each in 64 (packAcks), so
// a retry answers them again: hence 32. The server's --queue-max-batch is
// at most this.
const MaxQueueBatch = 32

// PushOutcome is the answer to one push of a push batch.
type PushOutcome struct {
	// Item is the item enqueued, or, when Duplicate, the item the dedupe
	// key enqueued earlier (before the batch or earlier in it).
	Item      uint64
	Duplicate bool
}

// claimMax is how many items claim c may get.
func claimMax(c *statev1.QueueClaim) int { return int(max(c.GetMaxItems(), 1)) }

// claimAcks validates claim c's batch size and returns the acks it
// carries: ack_item or acks.
func claimAcks(c *statev1.QueueClaim) ([]*statev1.QueueItemToken, error) {
	if c.GetMaxItems() > MaxQueueBatch {
		return nil, fmt.Errorf("%w: a claim of %d items is above the batch limit of %d", fence.ErrInvalidArgument, c.GetMaxItems(), MaxQueueBatch)
	}
	acks := c.GetAcks()
	if c.GetAckItem() != 0 {
		if len(acks) > 0 {
			return nil, fmt.Errorf("%w: a claim carries ack_item or acks, not both", fence.ErrInvalidArgument)
		}
		acks = []*statev1.QueueItemToken{{Item: c.GetAckItem(), Token: c.GetAckToken()}}
	}
	return acks, checkAckList(acks, false)
}

// checkAckList checks the acks of a claim (empty allowed) or of an ack
// batch (at least one).
func checkAckList(acks []*statev1.QueueItemToken, batch bool) error {
	switch {
	case batch && len(acks) == 0:
		return fmt.Errorf("%w: an ack batch needs at least one item", fence.ErrInvalidArgument)
	case len(acks) > MaxQueueBatch:
		return fmt.Errorf("%w: %d acks are above the batch limit of %d", fence.ErrInvalidArgument, len(acks), MaxQueueBatch)
	}
	for i, a := range acks {
		if a.GetItem() == 0 {
			return fmt.Errorf("%w: ack %d: item is 0", fence.ErrInvalidArgument, i)
		}
		if err := fence.ValidateToken(fence.Token(a.GetToken())); err != nil {
			return fmt.Errorf("ack %d: %w", i, err)
		}
	}
	return nil
}

// ackedItem is an item an ack will remove.
type ackedItem struct {
	q  *workQueue
	it *queueItem
}

// decideAcks decides the outcome of each ack of queue name, in order, and
// changes nothing: an item acked earlier in the list is stale for a later
// ack. freed counts the acked claims held by sessions of owner (their
// holds end).
func (t *queueTable) decideAcks(name string, acks []*statev1.QueueItemToken, owner string) (outcomes []AckOutcome, acked []ackedItem, freed int) {
	if len(acks) == 0 {
		return nil, nil, 0
	}
	outcomes = make([]AckOutcome, len(acks))
	for i, a := range acks {
		q, it, err := t.ackable(name, a.GetItem(), fence.Token(a.GetToken()))
		dup := false
		for _, d := range acked {
			dup = dup || (err == nil && d.it == it)
		}
		switch {
		case err == nil && !dup:
			outcomes[i] = AckAcked
			acked = append(acked, ackedItem{q, it})
			if h := t.m.sessions[it.claimSession]; h != nil && h.owner() == owner {
				freed++ // the ack ends one of the owner's holds
			}
		case dup || errors.Is(err, fence.ErrStaleToken):
			outcomes[i] = AckStale
		default:
			outcomes[i] = AckNotFound
		}
	}
	return outcomes, acked, freed
}

// holdRoom is how many more claims session s may hold under quota once
// freed of its holds end (checkHoldQuotaFreeing allowed one).
func holdRoom(s *session, quota *statev1.Quota, freed int) int {
	if s.owner() == "" || quota.GetMaxHeld() == 0 {
		return MaxQueueBatch
	}
	return max(int(quota.GetMaxHeld())-(s.use.held-freed), 1)
}

// packAcks packs ack outcomes, two bits each, first in the low bits: one
// ack packs as its AckOutcome, as replies kept before batches hold it.
func packAcks(outcomes []AckOutcome) uint64 {
	var v uint64
	for i, o := range outcomes {
		v |= uint64(o&3) << (2 * i)
	}
	return v
}

// validPackedAcks reports whether v is what packAcks makes of some acks:
// every outcome is acked, stale or not found (never none) up to the last
// one, and nothing above it.
func validPackedAcks(v uint64) bool {
	for ; v != 0; v >>= 2 {
		if AckOutcome(v&3) == AckNone {
			return false
		}
	}
	return true
}

// unpackAcks returns n ack outcomes packed by packAcks.
func unpackAcks(v uint64, n int) []AckOutcome {
	if n == 0 {
		return nil
	}
	out := make([]AckOutcome, n)
	for i := range out {
		out[i] = AckOutcome(v >> (2 * i) & 3)
	}
	return out
}

// firstAck is the first outcome, AckNone for none.
func firstAck(outcomes []AckOutcome) AckOutcome {
	if len(outcomes) == 0 {
		return AckNone
	}
	return outcomes[0]
}

// pushBatch enqueues b's pushes, all or none. A push whose dedupe key is
// in the queue's table, or on an earlier push of the batch, is a
// duplicate of that item and enqueues nothing. The payloads together are
// at most the leader's payload limit of one item, so a batch is no larger
// a message or Raft entry than one push may be.
func (t *queueTable) pushBatch(b *statev1.QueuePushBatch, now int64) Result {
	ps := b.GetPushes()
	if len(ps) == 0 || len(ps) > MaxQueueBatch {
		return Result{Err: fmt.Errorf("%w: a push batch has %d items; want 1 to %d", fence.ErrInvalidArgument, len(ps), MaxQueueBatch)}
	}
	name := ps[0].GetQueue()
	var items, bytes uint64
	// dupOf is, for a duplicate push, the item of its key in the table
	// (>0) or -1-the index of the push earlier in the batch with its key.
	dupOf := make([]int64, len(ps))
	for i, p := range ps {
		if p.GetQueue() != name {
			return Result{Err: fmt.Errorf("%w: push %d is to queue %q, not %q: a batch is of one queue", fence.ErrInvalidArgument, i, p.GetQueue(), name)}
		}
		if err := t.checkPush(p); err != nil {
			return Result{Err: fmt.Errorf("push %d: %w", i, err)}
		}
		if k := p.GetDedupeKey(); k != "" {
			if q := t.byName[name]; q != nil {
				if id, ok := q.dedupe[k]; ok {
					dupOf[i] = int64(id)
					continue
				}
			}
			// The first earlier push with k: at most MaxQueueBatch, so
			// a look back costs less than a map of the batch's keys (a
			// tenth of a push batch's apply, profiled).
			if first := slices.IndexFunc(ps[:i], func(e *statev1.QueuePush) bool { return e.GetDedupeKey() == k }); first >= 0 {
				dupOf[i] = -1 - int64(first)
				continue
			}
		}
		items++
		bytes += uint64(len(p.GetPayload()))
	}
	if limit := uint64(min(max(ps[0].GetMaxPayloadBytes(), 1), MaxQueuePayloadBytes)); ps[0].GetMaxPayloadBytes() > 0 && batchBytes(ps) > limit {
		return Result{Err: fmt.Errorf("%w: the batch's payloads are %d bytes together, above the limit of %d (one item's)", fence.ErrLimitExceeded, batchBytes(ps), limit)}
	}
	if err := t.checkRoom(ps[0], items, bytes); err != nil {
		return Result{Err: err}
	}
	t.advance(now)
	var q *workQueue
	if items > 0 {
		q = t.queue(name)
	}
	out := make([]PushOutcome, len(ps))
	for i, p := range ps {
		switch d := dupOf[i]; {
		case d > 0:
			out[i] = PushOutcome{Item: uint64(d), Duplicate: true}
		case d < 0:
			out[i] = PushOutcome{Item: out[-1-d].Item, Duplicate: true}
		default:
			out[i] = PushOutcome{Item: t.enqueue(q, p)}
		}
	}
	if q != nil {
		t.wake(q)
	}
	return Result{Queue: QueueResult{Item: out[0].Item, Duplicate: out[0].Duplicate, Pushed: out}}
}

// batchBytes is the payload bytes of pushes ps together.
func batchBytes(ps []*statev1.QueuePush) uint64 {
	var n uint64
	for _, p := range ps {
		n += uint64(len(p.GetPayload()))
	}
	return n
}

// ackBatch acks b's items, each with its own outcome; bad input (a bad
// name, an item 0, an invalid token, too many) refuses the batch.
func (t *queueTable) ackBatch(b *statev1.QueueAckBatch, now int64) Result {
	if err := ValidateQueueName(b.GetQueue()); err != nil {
		return Result{Err: err}
	}
	if err := checkAckList(b.GetAcks(), true); err != nil {
		return Result{Err: err}
	}
	outcomes, acked, _ := t.decideAcks(b.GetQueue(), b.GetAcks(), "")
	if len(acked) > 0 {
		t.advance(now)
	}
	for _, a := range acked {
		t.unclaim(a.q, a.it, Unlocked)
		t.remove(a.q, a.it.id)
	}
	return Result{Queue: QueueResult{Acks: outcomes}}
}
