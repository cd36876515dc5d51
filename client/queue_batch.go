package client

import (
	"context"
	"fmt"
	"time"

	fence "github.com/fenced-dev/fenced"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// Batches of the work queue (docs/queue.md, "Batches"): several items in
// one call and one Raft entry, up to the server's --queue-max-batch
// (default 32) each.

// PushItem is one item of PushBatch; its fields are Push's options.
type PushItem struct {
	Payload []byte
	// DedupeKey, as WithDedupeKey; empty gives the item a random key of
	// its own, so that a network retry enqueues it once.
	DedupeKey string
	// Delay, as WithDelay.
	Delay time.Duration
	// MaxDeliveries, as WithMaxDeliveries (0: the server's).
	MaxDeliveries uint32
}

// Pushed is the answer to one item of PushBatch.
type Pushed struct {
	// Item is the item's id; Duplicate reports that its dedupe key
	// enqueued Item before (before the batch, or earlier in it).
	Item      uint64
	Duplicate bool
}

// PushBatch enqueues items in one call, all or none: an item the server
// refuses (payload above the limit, a bad delay, the queues full, too
// many items) refuses the batch, and nothing is enqueued. The payloads
// together are at most the server's --queue-max-payload. Network failures
// are retried, under the same dedupe keys, until ctx ends.
func (q *Queue) PushBatch(ctx context.Context, items []PushItem) ([]Pushed, error) {
	req := &fencedv1.QueuePushBatchRequest{Queue: q.name, Items: make([]*fencedv1.QueuePushItem, len(items))}
	for i, it := range items {
		key := it.DedupeKey
		if key == "" {
			key = "sdk-" + newRequestID()
		}
		req.Items[i] = &fencedv1.QueuePushItem{Payload: it.Payload, DedupeKey: key, DelayMs: it.Delay.Milliseconds(), MaxDeliveries: it.MaxDeliveries}
	}
	var resp *fencedv1.QueuePushBatchResponse
	err := q.c.retry(ctx, "queue push batch", q.c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		r, err := ep.queuePushBatch(ctx, req)
		if err == nil {
			resp = r
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("client: queue push batch %q: %w", q.name, err)
	}
	if len(resp.GetItems()) != len(items) {
		return nil, fmt.Errorf("client: queue push batch %q: the server answered %d items of %d", q.name, len(resp.GetItems()), len(items))
	}
	out := make([]Pushed, len(items))
	for i, r := range resp.GetItems() {
		out[i] = Pushed{Item: r.GetItem(), Duplicate: r.GetDuplicate()}
	}
	return out, nil
}

// ClaimBatch is Claim for up to max items (1 to the server's
// --queue-max-batch) at once, each with its own claim token (increasing,
// from the one counter) and its own keep-alive. It returns as soon as it
// has at least one: what is available, up to max; when it waited, the
// items (up to max) that the push, nack or expiry which woke it made
// available. End each claim as Claim's are, or several at once
// with AckBatch or AckAndClaimNextBatch.
func (q *Queue) ClaimBatch(ctx context.Context, s *Session, visibility time.Duration, max int) ([]*Claim, error) {
	cls, _, err := q.claim(ctx, s, visibility, true, nil, max)
	return cls, err
}

// TryClaimBatch is ClaimBatch without waiting; it returns an error
// wrapping fence.ErrNotGranted when no item is available.
func (q *Queue) TryClaimBatch(ctx context.Context, s *Session, visibility time.Duration, max int) ([]*Claim, error) {
	cls, _, err := q.claim(ctx, s, visibility, false, nil, max)
	return cls, err
}

// AckAndClaimNextBatch acks done (claims of this queue and session) and
// claims up to max next items for session s, in one command:
// AckAndClaimNext for several. ackErrs has one entry per claim of done,
// as AckAndClaimNext's ackErr; the claim goes on whatever they say. The
// claims of done must not be used after.
func (q *Queue) AckAndClaimNextBatch(ctx context.Context, s *Session, visibility time.Duration, max int, done []*Claim) (next []*Claim, ackErrs []error, err error) {
	if err := q.own(done); err != nil {
		return nil, nil, err
	}
	for _, c := range done {
		c.end(errClaimEnded)
	}
	return q.claim(ctx, s, visibility, true, done, max)
}

// AckBatch acks claims (of this queue) in one call: errs has one entry per
// claim, nil for acked, else as Ack's error (fence.ErrStaleToken when its
// claim had ended). err is the call's: nothing was acked when it is set,
// or, after a network failure, not known (a retry whose first attempt was
// applied answers stale for the items it acked). The claims must not be
// used after.
func (q *Queue) AckBatch(ctx context.Context, claims []*Claim) (errs []error, err error) {
	if err := q.own(claims); err != nil {
		return nil, err
	}
	items := make([]ItemToken, len(claims))
	for i, c := range claims {
		c.end(errClaimEnded)
		items[i] = ItemToken{Item: c.Item, Token: c.Token}
	}
	return q.AckTokens(ctx, items)
}

// ItemToken names a claimed item and the claim token presented for it.
type ItemToken struct {
	Item  uint64
	Token fence.Token
}

// AckTokens acks items of the queue with claim tokens held elsewhere
// (another process, as the CLI does), in one call, without Claims; its
// errors are AckBatch's.
func (q *Queue) AckTokens(ctx context.Context, items []ItemToken) (errs []error, err error) {
	req := &fencedv1.QueueAckBatchRequest{Queue: q.name, Items: make([]*fencedv1.QueueAckItem, len(items))}
	for i, it := range items {
		req.Items[i] = &fencedv1.QueueAckItem{Item: it.Item, Token: uint64(it.Token)}
	}
	var resp *fencedv1.QueueAckBatchResponse
	err = q.c.retry(ctx, "ack batch", q.c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		r, err := ep.queueAckBatch(ctx, req)
		if err == nil {
			resp = r
		}
		return err
	})
	if err == nil && len(resp.GetOutcomes()) != len(items) {
		err = fmt.Errorf("the server answered %d outcomes for %d acks", len(resp.GetOutcomes()), len(items))
	}
	if err != nil {
		return nil, fmt.Errorf("client: ack batch %q: %w", q.name, err)
	}
	errs = make([]error, len(items))
	for i, o := range resp.GetOutcomes() {
		errs[i] = ackOutcomeErr(&Claim{Scope: fsmScope(q.name, items[i].Item), Token: items[i].Token}, o)
	}
	return errs, nil
}

// own checks that claims are of q's queue.
func (q *Queue) own(claims []*Claim) error {
	for _, c := range claims {
		if c == nil || c.Queue != q.name {
			return fmt.Errorf("client: %w: a batch acks claims of queue %q only", fence.ErrInvalidArgument, q.name)
		}
	}
	return nil
}
