package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// ErrClaimLost is the cause of a Claim's Context when the claim ended
// without this worker's ack or nack: its visibility timeout could not be
// extended in time, the server refused the extend (the claim expired and
// the item may be another worker's now), or the session was lost. Work
// done under it may overlap the next claim of the item; the claim token
// is what makes the resource reject the late write.
var ErrClaimLost = errors.New("client: claim lost")

// Queue is a work queue of the cluster (docs/queue.md). Delivery is at
// least once: an item whose claim ends without an ack is delivered again,
// with a higher claim token. Send the claim token with every write the
// work makes (object: Claim.Scope, "queue/item"), so that a resource
// guarded by fenced rejects a worker whose claim ended.
type Queue struct {
	c    *Client
	name string

	mu      sync.Mutex
	waiting map[uint64]*sync.Mutex // per session: one waiting claim at a time
}

// NewQueue returns the queue name through c. It does not contact the
// server.
func NewQueue(c *Client, name string) *Queue {
	return &Queue{c: c, name: name, waiting: make(map[uint64]*sync.Mutex)}
}

// Name returns the queue's name.
func (q *Queue) Name() string { return q.name }

// PushOption sets an option of a Push.
type PushOption func(*fencedv1.QueuePushRequest)

// WithDedupeKey makes Push enqueue once per key (up to 128 bytes) while
// the key is in the queue's dedupe table (the server's
// --queue-dedupe-keys newest keys): a producer's retry, or a second
// producer with the same key, gets the first push's item. Without it,
// Push uses a random key of its own, so that its own network retries
// enqueue once.
func WithDedupeKey(key string) PushOption {
	return func(r *fencedv1.QueuePushRequest) { r.DedupeKey = key }
}

// WithDelay keeps the item from being claimed for d (at most 12h).
func WithDelay(d time.Duration) PushOption {
	return func(r *fencedv1.QueuePushRequest) { r.DelayMs = d.Milliseconds() }
}

// WithMaxDeliveries sets how many deliveries the item gets before it
// moves to the dead-letter queue NAME.dead (default: the server's
// --queue-max-deliveries).
func WithMaxDeliveries(n uint32) PushOption {
	return func(r *fencedv1.QueuePushRequest) { r.MaxDeliveries = n }
}

// Push enqueues payload and returns the item's id; duplicate reports that
// the dedupe key enqueued it before. Network failures are retried, under
// the same dedupe key, until ctx ends.
func (q *Queue) Push(ctx context.Context, payload []byte, opts ...PushOption) (item uint64, duplicate bool, err error) {
	req := &fencedv1.QueuePushRequest{Queue: q.name, Payload: payload}
	for _, o := range opts {
		o(req)
	}
	if req.DedupeKey == "" {
		req.DedupeKey = "sdk-" + newRequestID()
	}
	var resp *fencedv1.QueuePushResponse
	err = q.c.retry(ctx, "queue push", q.c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		r, err := ep.queuePush(ctx, req)
		if err == nil {
			resp = r
		}
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("client: queue push %q: %w", q.name, err)
	}
	return resp.GetItem(), resp.GetDuplicate(), nil
}

// Claim waits until an item of the queue is handed to session s (the
// server pushes it; there is no polling) and returns it, claimed for
// visibility (100ms to 12h). While the Claim is held the SDK extends its
// visibility every third of it, like a session's keep-alive; when an
// extend fails past the visibility timeout or is refused, or the session
// is lost, the Claim's Context is cancelled with ErrClaimLost. End it with
// Ack or Nack.
//
// One session waits for one claim of a queue at a time: concurrent Claim
// calls of one Queue with one session take turns. Use a session per
// worker, or one session for many workers that claim in turn. If ctx ends
// while the claim is on its way, the item may stay claimed until its
// visibility timeout ends (at-least-once delivery).
func (q *Queue) Claim(ctx context.Context, s *Session, visibility time.Duration) (*Claim, error) {
	cls, _, err := q.claim(ctx, s, visibility, true, nil, 1)
	return first(cls), err
}

// TryClaim claims an available item without waiting; it returns an error
// wrapping fence.ErrNotGranted when none is available.
func (q *Queue) TryClaim(ctx context.Context, s *Session, visibility time.Duration) (*Claim, error) {
	cls, _, err := q.claim(ctx, s, visibility, false, nil, 1)
	return first(cls), err
}

func first(cls []*Claim) *Claim {
	if len(cls) == 0 {
		return nil
	}
	return cls[0]
}

func (q *Queue) turn(s *Session) *sync.Mutex {
	q.mu.Lock()
	defer q.mu.Unlock()
	mu := q.waiting[s.id]
	if mu == nil {
		mu = new(sync.Mutex)
		q.waiting[s.id] = mu
	}
	return mu
}

// claim claims up to most items for s; with prev, its first request acks
// prev in the same command (AckAndClaimNext), and ackErrs are those acks'
// outcomes (the claim's error while no answer told them).
func (q *Queue) claim(ctx context.Context, s *Session, visibility time.Duration, wait bool, prev []*Claim, most int) (_ []*Claim, ackErrs []error, _ error) {
	c := q.c
	fail := func(err error) ([]*Claim, []error, error) {
		err = fmt.Errorf("client: claim %q: %w", q.name, err)
		if ackErrs == nil && len(prev) > 0 {
			ackErrs = acksNotKnown(prev, err)
		}
		return nil, ackErrs, err
	}
	if err := c.closed(); err != nil {
		return fail(err)
	}
	if err := s.Err(); err != nil {
		return fail(err)
	}
	if wait {
		mu := q.turn(s)
		mu.Lock()
		defer mu.Unlock()
	}
	cctx, cancel := c.until(ctx, time.Time{}, nil)
	defer cancel()
	stop := context.AfterFunc(s.ctx, func() { cancel() })
	defer stop()
	for {
		seq := s.nextSeq()
		var waitFor time.Duration
		if wait {
			waitFor = maxWaitChunk
			if dl, ok := ctx.Deadline(); ok {
				left := time.Until(dl)
				waitFor = max(min(waitFor, left-min(left/10, 250*time.Millisecond)), 0)
			}
		}
		var resp *fencedv1.QueueClaimResponse
		req := &fencedv1.QueueClaimRequest{
			Queue: q.name, Session: s.id, Secret: s.secret, Seq: seq, VisibilityMs: visibility.Milliseconds(), WaitMs: waitFor.Milliseconds(),
		}
		if most > 1 {
			req.MaxItems = uint32(most)
		}
		switch {
		case len(prev) == 1:
			req.AckItem, req.AckToken = prev[0].Item, uint64(prev[0].Token)
		case len(prev) > 1:
			for _, p := range prev {
				req.Acks = append(req.Acks, &fencedv1.QueueAckItem{Item: p.Item, Token: uint64(p.Token)})
			}
		}
		err := c.retry(cctx, "claim", waitFor+c.requestTimeout, func(actx context.Context, ep *endpoint) error {
			r, err := ep.queueClaim(actx, req)
			if err == nil {
				resp = r
			}
			return err
		})
		if err == nil && len(prev) > 0 {
			// Answered: the acks are decided, and later requests carry none.
			outcomes := resp.GetAckOutcomes()
			if len(prev) == 1 {
				outcomes = []fencedv1.AckOutcome{resp.GetAckOutcome()}
			}
			ackErrs = make([]error, len(prev))
			for i, p := range prev {
				o := fencedv1.AckOutcome_ACK_OUTCOME_NONE // a server without several acks per claim
				if len(outcomes) == len(prev) {
					o = outcomes[i]
				}
				ackErrs[i] = ackOutcomeErr(p, o)
			}
			prev = nil
		}
		switch {
		case err != nil && s.Err() != nil:
			return fail(s.Err())
		case err != nil:
			return fail(err)
		case resp.GetClaimed():
			pcs := resp.GetClaims()
			if len(pcs) == 0 {
				pcs = []*fencedv1.Claim{resp.GetClaim()} // a server without batch claims
			}
			cls := make([]*Claim, len(pcs))
			for i, pc := range pcs {
				cls[i] = q.take(s, pc, visibility)
			}
			return cls, ackErrs, nil
		case !wait:
			return fail(fmt.Errorf("%w: no item available", fence.ErrNotGranted))
		case ctx.Err() != nil:
			return fail(ctx.Err())
		}
	}
}

// ackOutcomeErr is the error AckAndClaimNext reports for the outcome of
// prev's ack.
func ackOutcomeErr(prev *Claim, o fencedv1.AckOutcome) error {
	switch o {
	case fencedv1.AckOutcome_ACK_OUTCOME_ACKED:
		return nil
	case fencedv1.AckOutcome_ACK_OUTCOME_STALE:
		return fmt.Errorf("client: ack %s token %d: %w: the claim had ended (expired, or the item was claimed again, acked or dead-lettered)", prev.Scope, prev.Token, fence.ErrStaleToken)
	case fencedv1.AckOutcome_ACK_OUTCOME_NOT_FOUND:
		return fmt.Errorf("client: ack %s token %d: %w: the queue never had the item", prev.Scope, prev.Token, fence.ErrInvalidArgument)
	}
	return fmt.Errorf("client: ack %s token %d: %w: the server did not report the ack (a server without ack-and-claim-next ignores it); the item is not acked: Ack it", prev.Scope, prev.Token, errAckNotSupported)
}

// ErrAckNotKnown is the ack error of AckAndClaimNext (and its batch form)
// when the call failed before an answer told the acks' outcomes: each may
// have been applied or not. It does not wrap the call's error, whose text
// it keeps: a retried call whose claim had ended since its first attempt
// is refused as stale, and that attempt may have applied the acks; an ack
// error matching fence.ErrStaleToken would say they were refused.
var ErrAckNotKnown = errors.New("client: ack outcome not known")

// acksNotKnown is ErrAckNotKnown for each of prev, after the claim call
// failed with err.
func acksNotKnown(prev []*Claim, err error) []error {
	errs := make([]error, len(prev))
	for i, p := range prev {
		errs[i] = fmt.Errorf("client: ack %s token %d: %w (the call failed: %v)", p.Scope, p.Token, ErrAckNotKnown, err)
	}
	return errs
}

// errAckNotSupported is the cause of AckAndClaimNext's ackErr from a
// server that does not ack with a claim.
var errAckNotSupported = errors.New("ack with claim not supported by the server")

// take starts the claim's keep-alive.
func (q *Queue) take(s *Session, pc *fencedv1.Claim, visibility time.Duration) *Claim {
	g := grantOf(pc.GetGrant(), s.id, visibility)
	cl := &Claim{
		q: q, s: s, Queue: pc.GetQueue(), Item: pc.GetItem(), Token: g.Token, Scope: g.Scope, Grant: g,
		Payload: pc.GetPayload(), Deliveries: pc.GetDeliveries(), MaxDeliveries: pc.GetMaxDeliveries(), OriginItem: pc.GetOriginItem(),
		visibility: visibility, done: make(chan struct{}),
	}
	cl.ctx, cl.cancel = context.WithCancelCause(s.ctx)
	go cl.keepAlive(time.Now())
	return cl
}

// Claim is one claimed item. Its fields do not change.
type Claim struct {
	q *Queue
	s *Session
	// Queue and Item name the item; Scope is "queue/item", the object
	// to fence at the resource.
	Queue string
	Item  uint64
	Scope string
	// Token is the claim token: send it with every write the work makes.
	Token fence.Token
	// Grant is the claim's grant (kind claim).
	Grant   fence.Grant
	Payload []byte
	// Deliveries counts this item's deliveries, this one included;
	// MaxDeliveries is its limit.
	Deliveries, MaxDeliveries uint32
	// OriginItem is, in a dead-letter queue, the item's id in its queue.
	OriginItem uint64

	visibility time.Duration
	ctx        context.Context
	cancel     context.CancelCauseFunc
	once       sync.Once
	done       chan struct{} // closed when the keep-alive stopped
}

// Context is cancelled when the claim is lost (cause ErrClaimLost, or the
// session's error) or ended by Ack or Nack. It is advice, measured on this
// process's clock from when each reply arrived, so it may be cancelled
// later than the server ended the claim (by a reply's transit time, or
// never in time for a paused process): the claim token checked at the
// resource is what rejects a late write.
func (c *Claim) Context() context.Context { return c.ctx }

// Done is Context().Done().
func (c *Claim) Done() <-chan struct{} { return c.ctx.Done() }

// keepAlive extends the claim every third of its visibility until it
// ends; an extend refused, or none accepted within the visibility
// timeout of the last one sent before an accepted one, loses the claim.
func (c *Claim) keepAlive(start time.Time) {
	defer close(c.done)
	valid := start.Add(c.visibility)
	every := c.visibility / 3
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		sent := time.Now()
		ctx, cancel := context.WithDeadline(c.ctx, valid)
		err := c.extend(ctx)
		cancel()
		switch {
		case c.ctx.Err() != nil:
			return
		case err == nil:
			valid = sent.Add(c.visibility)
		case errors.Is(err, fence.ErrStaleToken) || time.Now().After(valid):
			c.cancel(fmt.Errorf("%w: %s token %d: %w", ErrClaimLost, c.Scope, c.Token, err))
			return
		}
		t.Reset(max(min(every, time.Until(valid)/2), time.Millisecond))
	}
}

func (c *Claim) extend(ctx context.Context) error {
	return c.q.c.retry(ctx, "extend", c.q.c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		_, err := ep.queues.Extend(ctx, connect.NewRequest(&fencedv1.QueueExtendRequest{Queue: c.Queue, Item: c.Item, Token: uint64(c.Token), VisibilityMs: c.visibility.Milliseconds()}))
		return err
	})
}

// end stops the keep-alive before an ack or nack is sent.
func (c *Claim) end(cause error) {
	c.once.Do(func() { c.cancel(cause) })
	<-c.done
}

// errClaimEnded is the cause of a Claim's Context after Ack or Nack.
var errClaimEnded = errors.New("client: claim ended by this worker")

// Ack reports the item done: the server removes it. It returns an error
// wrapping fence.ErrStaleToken when the claim had ended (expired, and the
// item perhaps claimed by another worker): the work must be taken as not
// done by this worker. Network failures are retried until ctx ends; a
// retry whose first attempt was applied also reports ErrStaleToken.
func (c *Claim) Ack(ctx context.Context) error {
	c.end(errClaimEnded)
	err := c.q.c.retry(ctx, "ack", c.q.c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		return ep.queueAck(ctx, &fencedv1.QueueAckRequest{Queue: c.Queue, Item: c.Item, Token: uint64(c.Token)})
	})
	if err != nil {
		return fmt.Errorf("client: ack %s token %d: %w", c.Scope, c.Token, err)
	}
	return nil
}

// AckAndClaimNext acks c and claims the next item of its queue for the
// same session and visibility, in one command (one Raft commit instead of
// two): the server applies the ack, with Ack's token check, and then the
// claim, atomically. It waits for an item as Queue.Claim does.
//
// ackErr is the ack's outcome, reported apart from the claim's: nil when c
// was acked; an error wrapping fence.ErrStaleToken when c's claim had
// ended (take the work as not done by this worker, as Ack's error says);
// one wrapping fence.ErrInvalidArgument for an item the queue never had;
// or, while no answer from the server told it (err is set), one wrapping
// ErrAckNotKnown: the ack may have been applied (an earlier attempt of a
// retried call) or not. The claim goes on whether or not the ack was
// accepted: next and err are the claim's, as Queue.Claim returns them. A
// network retry resends the same request (session, seq), which the
// server answers as the first time, without acking twice.
//
// c's keep-alive stops first, as in Ack; c must not be used after.
func (c *Claim) AckAndClaimNext(ctx context.Context) (next *Claim, ackErr, err error) {
	c.end(errClaimEnded)
	cls, ackErrs, err := c.q.claim(ctx, c.s, c.visibility, true, []*Claim{c}, 1)
	return first(cls), ackErrs[0], err
}

// Nack gives the item back to the queue, to be claimed again after delay
// (or moved to the dead-letter queue after its last delivery). Errors are
// those of Ack.
func (c *Claim) Nack(ctx context.Context, delay time.Duration) error {
	c.end(errClaimEnded)
	err := c.q.c.retry(ctx, "nack", c.q.c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		return ep.queueNack(ctx, &fencedv1.QueueNackRequest{Queue: c.Queue, Item: c.Item, Token: uint64(c.Token), DelayMs: delay.Milliseconds()})
	})
	if err != nil {
		return fmt.Errorf("client: nack %s token %d: %w", c.Scope, c.Token, err)
	}
	return nil
}

// QueueStats describes a queue.
type QueueStats struct {
	Queue                                string
	Exists                               bool
	Available, Delayed, Claimed, Waiters uint32
	// Dead counts the items of the dead-letter queue NAME.dead.
	Dead     uint32
	LastItem uint64
	// Items is the page of items asked for.
	Items []QueueItem
}

// QueueItem is one item as Stats lists it.
type QueueItem struct {
	Item, OriginItem          uint64
	Payload                   []byte
	Deliveries, MaxDeliveries uint32
	// Claimed reports a live claim, whose grant is Grant.
	Claimed     bool
	Grant       fence.Grant
	AvailableAt time.Time
}

// Stats reads the queue's counts and up to items of its items after item
// after (a linearizable read).
func (q *Queue) Stats(ctx context.Context, items uint32, after uint64) (QueueStats, error) {
	var resp *fencedv1.QueueStatsResponse
	err := q.c.retry(ctx, "queue stats", q.c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		r, err := ep.queues.Stats(ctx, connect.NewRequest(&fencedv1.QueueStatsRequest{Queue: q.name, Items: items, After: after}))
		if err == nil {
			resp = r.Msg
		}
		return err
	})
	if err != nil {
		return QueueStats{}, fmt.Errorf("client: queue stats %q: %w", q.name, err)
	}
	st := QueueStats{Queue: resp.GetQueue(), Exists: resp.GetExists(), Available: resp.GetAvailable(), Delayed: resp.GetDelayed(), Claimed: resp.GetClaimed(),
		Waiters: resp.GetWaiters(), Dead: resp.GetDead(), LastItem: resp.GetLastItem()}
	for _, it := range resp.GetItems() {
		qi := QueueItem{Item: it.GetItem().GetItem(), OriginItem: it.GetItem().GetOriginItem(), Payload: it.GetItem().GetPayload(), Deliveries: it.GetItem().GetDeliveries(),
			MaxDeliveries: it.GetItem().GetMaxDeliveries(), Claimed: it.GetClaimed(), AvailableAt: time.UnixMilli(it.GetAvailableAtUnixMs()).UTC()}
		if g := it.GetItem().GetGrant(); g != nil {
			qi.Grant = grantOf(g, 0, 0)
		}
		st.Items = append(st.Items, qi)
	}
	return st, nil
}

// AckToken acks item of queue with a claim token held elsewhere (another
// process, as the CLI does), without a Claim.
func (q *Queue) AckToken(ctx context.Context, item uint64, token fence.Token) error {
	err := q.c.retry(ctx, "ack", q.c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		return ep.queueAck(ctx, &fencedv1.QueueAckRequest{Queue: q.name, Item: item, Token: uint64(token)})
	})
	if err != nil {
		return fmt.Errorf("client: ack %s token %d: %w", fsmScope(q.name, item), token, err)
	}
	return nil
}

// NackToken nacks item of queue with a claim token held elsewhere.
func (q *Queue) NackToken(ctx context.Context, item uint64, token fence.Token, delay time.Duration) error {
	err := q.c.retry(ctx, "nack", q.c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		return ep.queueNack(ctx, &fencedv1.QueueNackRequest{Queue: q.name, Item: item, Token: uint64(token), DelayMs: delay.Milliseconds()})
	})
	if err != nil {
		return fmt.Errorf("client: nack %s token %d: %w", fsmScope(q.name, item), token, err)
	}
	return nil
}

func fsmScope(queue string, item uint64) string { return fmt.Sprintf("%s/%d", queue, item) }
