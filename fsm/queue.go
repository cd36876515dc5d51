package fsm

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	fence "github.com/fenced-dev/fenced"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// The work queue with fenced claims (docs/queue.md), on the shared parts.
// A queue holds items in push order. A claim hands the oldest available
// item to one session with a grant of kind claim and scope "queue/item"
// (Machine.issueGrant, the one token counter); while it is claimed nobody
// else gets it. A claim ends by an ack (the item is removed), a nack (the
// item goes back, after a delay), the expiry of its visibility timeout
// (ExpireClaim, decided by the leader like ExpireSession) or the end of
// its session: the item goes back to the queue, and the next claim of it
// has a higher token. An ack, nack or extend must present the item's
// current claim token; any other is refused as stale and changes nothing.
// After max_deliveries deliveries that did not end in an ack the item
// moves to the dead-letter queue NAME.dead.
//
// The Machine reads no clock: the queues' time (queueTable.clock) is the
// newest now_unix_ms a queue command carried, so it never goes backwards,
// even under a new leader whose clock is behind. It decides only which
// delayed items are available; visibility timeouts are the leader's to
// expire.

// Limits of the work queue the state machine enforces whatever the
// proposing leader's flags say.
const (
	// MaxQueuePayloadBytes is the largest payload any push may carry; the
	// server's --queue-max-payload (default 256 KiB) is at most this.
	MaxQueuePayloadBytes = 1 << 20
	// MinVisibility and MaxVisibility bound a claim's visibility timeout.
	MinVisibility = 100 * time.Millisecond
	MaxVisibility = 12 * time.Hour
	// MaxQueueDelay bounds a push's or nack's delay.
	MaxQueueDelay = 12 * time.Hour
	// MaxDedupeKeyLen bounds a push's dedupe key.
	MaxDedupeKeyLen = 128
	// MaxDedupeWindow bounds the dedupe table of one queue.
	MaxDedupeWindow = 1 << 20
	// DeadLetterSuffix names a queue's dead-letter queue: NAME.dead. A
	// dead-letter queue's items never move on.
	DeadLetterSuffix = ".dead"
)

// queueItem is one item of a queue; claimToken is 0 when not claimed.
type queueItem struct {
	id            uint64
	payload       []byte
	dedupeKey     string
	enqueuedAt    int64
	availableAt   int64
	deliveries    uint32
	maxDeliveries uint32
	originItem    uint64
	claimToken    fence.Token
	claimSession  uint64
	claimedAt     int64
	visibilityMs  int64
}

// workQueue is one named queue.
type workQueue struct {
	name     string
	lastItem uint64
	items    map[uint64]*queueItem
	order    []uint64 // item ids, ascending: the queue order
	// claimedHead is a count of leading items of order known to be
	// claimed: a scan for an available item starts there (derived, not
	// in the snapshot; a claim given back before it lowers it, an item
	// removed before it takes one off). Without
	// it every claim walked past all the claimed items at the front: 64
	// workers holding 16 each made a scan of a thousand items, 17 % of
	// the apply time of a batch cycle.
	claimedHead int
	// dedupe maps a dedupe key to the item its push enqueued; dedupeOrder
	// lists the keys oldest first, to forget the oldest beyond the window.
	dedupe      map[string]uint64
	dedupeOrder []string
	waiters     waitQueue
	// waitVis is the visibility each waiting session asked for.
	waitVis map[uint64]int64
}

// claimRef locates a live claim.
type claimRef struct {
	queue string
	item  uint64
}

// queueTable is the work-queue primitive: every queue by name, the live
// claims by token and the queues' time.
type queueTable struct {
	m      *Machine
	byName map[string]*workQueue
	claims map[fence.Token]claimRef
	clock  int64
	// items and bytes count every queue's items and payload bytes (not
	// in the snapshot: restore counts them).
	items, bytes uint64
}

var _ primitive = (*queueTable)(nil)

func newQueueTable(m *Machine) *queueTable {
	return &queueTable{m: m, byName: make(map[string]*workQueue), claims: make(map[fence.Token]claimRef)}
}

// ClaimObserver is implemented by an Observer that tracks claims'
// visibility timeouts (the server's expiry loop): ClaimStarted is called
// when a claim is granted and each time it is extended, with its
// visibility timeout from now; the claim's end is Observer.Released (kind
// claim).
type ClaimObserver interface {
	ClaimStarted(token fence.Token, visibility time.Duration)
}

// ClaimInfo describes a live claim.
type ClaimInfo struct {
	// Queue and Item name the claimed item.
	Queue string
	Item  uint64
	// Grant is the claim's grant: kind claim, scope "queue/item", its
	// Token is the claim token.
	Grant fence.Grant
	// Payload is the item's payload; callers must not modify it.
	Payload []byte
	// Deliveries counts the item's deliveries, this one included;
	// MaxDeliveries is its limit (0: none).
	Deliveries, MaxDeliveries uint32
	// Visibility is the claim's visibility timeout.
	Visibility time.Duration
	// OriginItem is, in a dead-letter queue, the item's id in its queue.
	OriginItem uint64
}

// QueueResult is the outcome of a queue command.
type QueueResult struct {
	// Item is the item a push enqueued (or, when Duplicate, enqueued
	// earlier with the same dedupe key).
	Item      uint64
	Duplicate bool
	// Claim is set for a claim that was granted (Result.Granted).
	Claim ClaimInfo
	// Ack is the outcome of the ack a claim carried (ack-and-claim-next;
	// AckNone when it carried none); with several, the first's.
	Ack AckOutcome
	// Claims are every item a claim got (a batch claim may get several;
	// Claim is the first); Acks the outcome of each ack a claim or an
	// ack batch carried, in their order; Pushed the answer to each push
	// of a push batch.
	Claims []ClaimInfo
	Acks   []AckOutcome
	Pushed []PushOutcome
}

// AckOutcome is what the ack carried by a claim did (QueueClaim.ack_item,
// ack-and-claim-next). Its values match fencedv1.AckOutcome.
type AckOutcome uint8

// The outcomes of the ack a claim carries.
const (
	// AckNone: the claim carried no ack.
	AckNone AckOutcome = iota
	// AckAcked: the item was acked and removed, as QueueAck does.
	AckAcked
	// AckStale: the token is not the item's current claim token (the
	// claim ended, the item was claimed again, acked or dead-lettered);
	// nothing changed for the item.
	AckStale
	// AckNotFound: the queue never had the item; nothing changed.
	AckNotFound
)

// String names the outcome.
func (o AckOutcome) String() string {
	switch o {
	case AckNone:
		return "none"
	case AckAcked:
		return "acked"
	case AckStale:
		return "stale"
	case AckNotFound:
		return "not found"
	}
	return "AckOutcome(" + strconv.Itoa(int(o)) + ")"
}

// Resources of a QueueLimitError.
const (
	QueueLimitItems = "items"
	QueueLimitBytes = "bytes"
)

// QueueLimitError refuses a push that would take the queues past the
// proposing leader's --queue-max-items or --queue-max-bytes. It matches
// fence.ErrLimitExceeded with errors.Is.
type QueueLimitError struct {
	// Resource is QueueLimitItems or QueueLimitBytes.
	Resource string
	// Limit is the limit; Have is what the queues hold.
	Limit, Have uint64
}

// Error names the limit that was hit and what to do.
func (e *QueueLimitError) Error() string {
	return fmt.Sprintf("%v: the work queues hold %d %s, at their limit of %d; ack or drain items first", fence.ErrLimitExceeded, e.Have, e.Resource, e.Limit)
}

// Unwrap makes errors.Is(err, fence.ErrLimitExceeded) hold.
func (e *QueueLimitError) Unwrap() error { return fence.ErrLimitExceeded }

// queueReplyPrefix and queueReplyName: a claim is remembered in its
// session's replies under "\x00queue\x00" + the queue's name, apart from a
// lock's or an election's of the same name (dedup.go), so a seq used for a
// claim is never answered with a lock's grant or the other way round.
const queueReplyPrefix = "\x00queue\x00"

func queueReplyName(name string) string { return queueReplyPrefix + name }

// ClaimScope is the scope of a claim on item of queue: "queue/item".
func ClaimScope(queue string, item uint64) string {
	return queue + "/" + strconv.FormatUint(item, 10)
}

// parseClaimScope splits a claim scope at its last slash.
func parseClaimScope(scope string) (string, uint64, bool) {
	i := strings.LastIndexByte(scope, '/')
	if i < 0 {
		return "", 0, false
	}
	id, err := strconv.ParseUint(scope[i+1:], 10, 64)
	return scope[:i], id, err == nil
}

// ValidateQueueName checks a queue name: a valid name (fence.ValidateName)
// with room for the dead-letter suffix, unless it is a dead-letter queue.
func ValidateQueueName(name string) error {
	if err := fence.ValidateName(name); err != nil {
		return err
	}
	if !strings.HasSuffix(name, DeadLetterSuffix) && len(name)+len(DeadLetterSuffix) > fence.MaxNameLen {
		return fmt.Errorf("%w: queue name is %d bytes; at most %d, to leave room for its dead-letter queue %q", fence.ErrInvalidArgument, len(name), fence.MaxNameLen-len(DeadLetterSuffix), "NAME"+DeadLetterSuffix)
	}
	return nil
}

// ValidateVisibilityMillis checks a claim's visibility timeout.
func ValidateVisibilityMillis(ms int64) error {
	if ms < MinVisibility.Milliseconds() || ms > MaxVisibility.Milliseconds() {
		return fmt.Errorf("%w: visibility timeout %v is outside %v to %v", fence.ErrInvalidArgument, msDuration(ms), MinVisibility, MaxVisibility)
	}
	return nil
}

// ValidateQueueDelayMillis checks a push's or nack's delay.
func ValidateQueueDelayMillis(ms int64) error {
	if ms < 0 || ms > MaxQueueDelay.Milliseconds() {
		return fmt.Errorf("%w: delay %v is outside 0 to %v", fence.ErrInvalidArgument, msDuration(ms), MaxQueueDelay)
	}
	return nil
}

func (t *queueTable) advance(now int64) {
	if now > t.clock {
		t.clock = now
	}
}

// timeAt is the queues' time at a command carrying now.
func (t *queueTable) timeAt(now int64) int64 { return max(t.clock, now) }

func (t *queueTable) queue(name string) *workQueue {
	q := t.byName[name]
	if q == nil {
		q = &workQueue{name: name, items: make(map[uint64]*queueItem), dedupe: make(map[string]uint64), waitVis: make(map[uint64]int64)}
		t.byName[name] = q
	}
	return q
}

// dropIfIdle forgets a queue that never had an item and has no waiters: a
// queue that had items keeps its last item id, so ids never repeat.
func (t *queueTable) dropIfIdle(q *workQueue) {
	if q.lastItem == 0 && len(q.items) == 0 && q.waiters.len() == 0 && len(q.dedupe) == 0 {
		delete(t.byName, q.name)
	}
}

// firstAvailable returns the oldest item that is not claimed and whose
// delay ended by now.
func (q *workQueue) firstAvailable(now int64) *queueItem {
	_, it := q.nextAvailable(now, 0)
	return it
}

// nextAvailable returns the oldest item at or after position from of
// q.order that is not claimed and whose delay ended by now, and its
// position.
func (q *workQueue) nextAvailable(now int64, from int) (int, *queueItem) {
	for i := max(from, q.skipClaimed()); i < len(q.order); i++ {
		if it := q.items[q.order[i]]; it.claimToken == 0 && it.availableAt <= now {
			return i, it
		}
	}
	return len(q.order), nil
}

// skipClaimed moves q.claimedHead past the claimed items after it and
// returns it: every item before it is claimed.
func (q *workQueue) skipClaimed() int {
	for q.claimedHead < len(q.order) && q.items[q.order[q.claimedHead]].claimToken != 0 {
		q.claimedHead++
	}
	return q.claimedHead
}

// availableAfterWaiters returns the items, up to most, a new claim gets
// at now: the oldest available items once q's waiting claims took theirs
// (wake gives them the oldest, in their order, up to waiterTake each).
func (t *queueTable) availableAfterWaiters(q *workQueue, now int64, most int) []*queueItem {
	skip := 0
	for _, w := range q.waiters.list {
		skip += t.waiterTake(w)
	}
	var out []*queueItem
	for _, id := range q.order[q.skipClaimed():] {
		if it := q.items[id]; it.claimToken == 0 && it.availableAt <= now {
			if skip == 0 {
				if out = append(out, it); len(out) == most {
					return out
				}
				continue
			}
			skip--
		}
	}
	return out
}

func (t *queueTable) add(q *workQueue, it *queueItem) {
	q.items[it.id] = it
	q.order = append(q.order, it.id) // ids only grow
	t.items++
	t.bytes += uint64(len(it.payload))
}

func (t *queueTable) remove(q *workQueue, id uint64) {
	if it := q.items[id]; it != nil {
		t.items--
		t.bytes -= uint64(len(it.payload))
	}
	delete(q.items, id)
	// q.order is ascending: find id by binary search, then close the gap
	// from the nearer end. Acks and dead letters remove the oldest items
	// mostly, so the front moves up by one instead of the whole queue
	// moving down (a profile of 64 workers acking in batches of 16 spent
	// 5-8 % of a node's CPU moving q.order).
	i, ok := slices.BinarySearch(q.order, id)
	if !ok {
		return
	}
	if i < q.claimedHead {
		q.claimedHead-- // the items before it stay claimed
	}
	if i < len(q.order)/2 {
		copy(q.order[1:i+1], q.order[:i])
		q.order = q.order[1:]
		return
	}
	q.order = append(q.order[:i], q.order[i+1:]...)
}

// checkPush validates a push; it changes nothing.
func (t *queueTable) checkPush(p *statev1.QueuePush) error {
	m, name := t.m, p.GetQueue()
	limit := int(min(p.GetMaxPayloadBytes(), MaxQueuePayloadBytes))
	if p.GetMaxPayloadBytes() == 0 {
		limit = MaxQueuePayloadBytes
	}
	switch {
	case ValidateQueueName(name) != nil:
		return ValidateQueueName(name)
	case len(p.GetPayload()) > limit:
		return fmt.Errorf("%w: payload is %d bytes, above the limit of %d", fence.ErrLimitExceeded, len(p.GetPayload()), limit)
	case len(p.GetDedupeKey()) > MaxDedupeKeyLen:
		return fmt.Errorf("%w: dedupe key is %d bytes, longer than %d", fence.ErrInvalidArgument, len(p.GetDedupeKey()), MaxDedupeKeyLen)
	case p.GetDedupeWindow() > MaxDedupeWindow:
		return fmt.Errorf("%w: dedupe window %d is above %d", fence.ErrInvalidArgument, p.GetDedupeWindow(), MaxDedupeWindow)
	case m.issuer == "":
		return errNotInitialised()
	}
	return ValidateQueueDelayMillis(p.GetDelayMs())
}

// checkRoom refuses adding items items of bytes bytes past the push's
// limits on every queue together.
func (t *queueTable) checkRoom(p *statev1.QueuePush, items, bytes uint64) error {
	if l := p.GetMaxItems(); l > 0 && t.items+items > l {
		return &QueueLimitError{Resource: QueueLimitItems, Limit: l, Have: t.items}
	}
	if l := p.GetMaxBytes(); l > 0 && t.bytes+bytes > l {
		return &QueueLimitError{Resource: QueueLimitBytes, Limit: l, Have: t.bytes}
	}
	return nil
}

func (t *queueTable) push(p *statev1.QueuePush, now int64) Result {
	if err := t.checkPush(p); err != nil {
		return Result{Err: err}
	}
	name, key := p.GetQueue(), p.GetDedupeKey()
	if q := t.byName[name]; q != nil && key != "" {
		if id, ok := q.dedupe[key]; ok {
			return Result{Queue: QueueResult{Item: id, Duplicate: true}}
		}
	}
	if err := t.checkRoom(p, 1, uint64(len(p.GetPayload()))); err != nil {
		return Result{Err: err}
	}
	t.advance(now)
	q := t.queue(name)
	id := t.enqueue(q, p)
	t.wake(q)
	return Result{Queue: QueueResult{Item: id}}
}

// enqueue adds p's item to q (checked by checkPush, its key not a
// duplicate) and returns its id; the caller wakes q's waiters.
func (t *queueTable) enqueue(q *workQueue, p *statev1.QueuePush) uint64 {
	name, key := q.name, p.GetDedupeKey()
	q.lastItem++
	maxDel := p.GetMaxDeliveries()
	if strings.HasSuffix(name, DeadLetterSuffix) {
		maxDel = 0
	}
	t.add(q, &queueItem{id: q.lastItem, payload: p.GetPayload(), dedupeKey: key, enqueuedAt: t.clock, availableAt: t.clock + p.GetDelayMs(), maxDeliveries: maxDel})
	if key != "" {
		q.dedupe[key] = q.lastItem
		q.dedupeOrder = append(q.dedupeOrder, key)
		for len(q.dedupeOrder) > int(max(p.GetDedupeWindow(), 1)) {
			delete(q.dedupe, q.dedupeOrder[0])
			q.dedupeOrder = q.dedupeOrder[1:]
		}
	}
	return q.lastItem
}

func (t *queueTable) claim(c *statev1.QueueClaim, now int64) Result {
	m, name := t.m, c.GetQueue()
	if err := ValidateQueueName(name); err != nil {
		return Result{Err: err}
	}
	if err := ValidateVisibilityMillis(c.GetVisibilityMs()); err != nil {
		return Result{Err: err}
	}
	if c.GetSession() == 0 {
		return Result{Err: fmt.Errorf("%w: a claim needs a session (session is 0)", fence.ErrInvalidArgument)}
	}
	if m.issuer == "" {
		return Result{Err: errNotInitialised()}
	}
	if (c.GetAckItem() == 0) != (c.GetAckToken() == 0) {
		return Result{Err: fmt.Errorf("%w: a claim's ack needs both ack_item and ack_token (item %d, token %d)", fence.ErrInvalidArgument, c.GetAckItem(), c.GetAckToken())}
	}
	acks, err := claimAcks(c)
	if err != nil {
		return Result{Err: err}
	}
	if m.tokens.exhausted() {
		return Result{Err: m.tokens.overflow()}
	}
	s, seq, _, err := m.requestSession(c.GetSession(), c.GetSeq(), "", 0, c.GetQuota(), c.GetSecretHash())
	if err != nil {
		return Result{Err: err}
	}
	if seq > 0 {
		rep, ok, err := s.replies.get(seq, queueReplyName(name))
		if err != nil {
			return Result{Err: err}
		}
		if ok {
			res := t.replay(s, seq, rep)
			n := len(acks)
			if n == 0 && rep.holder != 0 {
				n = 1 // a retry that left out its one ack is still told it
			}
			res.Queue.Acks = unpackAcks(rep.holder, n)
			res.Queue.Ack = firstAck(res.Queue.Acks)
			return res
		}
	}
	// The acks first (ack-and-claim-next): decided now, applied below once
	// nothing can refuse the claim, so a refused command changes nothing.
	outcomes, acked, freed := t.decideAcks(name, acks, s.owner())
	clock := t.timeAt(now)
	q := t.byName[name]
	var its []*queueItem
	if q != nil {
		its = t.availableAfterWaiters(q, clock, claimMax(c))
	}
	if len(its) == 0 && c.GetWait() && q != nil && q.waiters.has(s.id) {
		return Result{Err: fmt.Errorf("%w: session %d already waits to claim from %q; a session waits for one claim of a queue at a time", fence.ErrInvalidArgument, s.id, name)}
	}
	if len(its) > 0 || c.GetWait() {
		if err := checkHoldQuotaFreeing(s, c.GetQuota(), len(its) == 0, freed); err != nil {
			return Result{Err: err}
		}
		its = its[:min(len(its), holdRoom(s, c.GetQuota(), freed))]
	}
	if len(acked) > 0 {
		// The items acked are claimed, so the available items (its) and
		// the waiters are the same after them as before.
		t.advance(now)
		for _, a := range acked {
			t.unclaim(a.q, a.it, Unlocked)
			t.remove(a.q, a.it.id)
		}
	}
	res := t.claimNext(c, now, s, seq, q, its, clock, packAcks(outcomes))
	res.Queue.Acks, res.Queue.Ack = outcomes, firstAck(outcomes)
	return res
}

// claimNext is the claim part of claim, once the claim's acks were
// applied: it claims its, queues s or answers not granted, and records the
// reply with the acks' outcomes (packAcks) in its holder field (a queue
// reply has no holder) and how many items it claimed in its issuedAt
// field (a queue claim's replay reads no issue time), so a retry answers
// the same.
func (t *queueTable) claimNext(c *statev1.QueueClaim, now int64, s *session, seq uint64, q *workQueue, its []*queueItem, clock int64, ack uint64) Result {
	m, name := t.m, c.GetQueue()
	if q != nil && q.waiters.len() > 0 && q.firstAvailable(clock) != nil {
		// An item whose delay ended by this claim's time and that no tick
		// handed out yet goes to the claims that waited for it first:
		// waiting claims are served in arrival order.
		t.advance(now)
		t.wake(q)
		if len(its) > 0 && m.tokens.exhausted() {
			s.replies.put(reply{seq: seq, kind: replyNotGranted, name: queueReplyName(name), holder: ack})
			return Result{Session: s.id}
		}
	}
	switch {
	case len(its) > 0:
		t.advance(now)
		res := Result{Session: s.id, Granted: true}
		for _, it := range its {
			if len(res.Queue.Claims) > 0 && m.tokens.exhausted() {
				break // fewer: the tokens ran out
			}
			g := t.grantItem(q, it, s, c.GetVisibilityMs())
			m.obs.Granted(g)
			res.Queue.Claims = append(res.Queue.Claims, claimedInfo(q, it, g))
		}
		res.Grant, res.Queue.Claim = res.Queue.Claims[0].Grant, res.Queue.Claims[0]
		got := -int64(len(res.Queue.Claims)) // replyItems
		if claimMax(c) == 1 {
			got = t.clock // as replies kept before batch claims: a claim of one item got one
		}
		s.replies.put(reply{seq: seq, kind: replyGranted, name: queueReplyName(name), token: res.Grant.Token, issuedAt: got, holder: ack})
		return res
	case c.GetWait():
		q = t.queue(name)
		m.enqueue(kindQueue, fence.KindClaim, name, &q.waiters, s, seq)
		q.waitVis[s.id] = c.GetVisibilityMs()
		var most int64 // replyItems: how many the waiter may get
		if claimMax(c) > 1 {
			most = -int64(claimMax(c))
		}
		// The queued reply's token field (a queued reply has no token yet)
		// keeps the owner's max_held, so that wake cuts the items this
		// claim gets to the room left then (waiterTake).
		s.replies.put(reply{seq: seq, kind: replyQueued, name: queueReplyName(name), holder: ack, issuedAt: most, token: waitHeldLimit(s, c.GetQuota())})
		return Result{Session: s.id, Queued: true}
	default:
		s.replies.put(reply{seq: seq, kind: replyNotGranted, name: queueReplyName(name), holder: ack})
		return Result{Session: s.id}
	}
}

// replyItems is how many items a queue claim's reply says it got
// (granted) or may get (queued): a batch claim's reply keeps minus that
// number in its issuedAt field, which a queue claim's replay reads for
// nothing else; a reply of one item keeps the queues' time there, or 0,
// as replies kept before batch claims do.
func replyItems(rep reply) int {
	if rep.issuedAt < 0 {
		return int(min(-rep.issuedAt, MaxQueueBatch))
	}
	return 1
}

// replay answers a retried claim with its first result: the claims it
// got that are still live.
func (t *queueTable) replay(s *session, seq uint64, rep reply) Result {
	switch rep.kind {
	case replyGranted:
		// A claim's tokens are consecutive (one apply issued them).
		n := replyItems(rep)
		res := Result{Session: s.id, Granted: true}
		for tok := rep.token; tok < rep.token+fence.Token(n); tok++ {
			if ref, ok := t.claims[tok]; ok {
				q := t.byName[ref.queue]
				res.Queue.Claims = append(res.Queue.Claims, t.info(q, q.items[ref.item]))
			}
		}
		if len(res.Queue.Claims) > 0 {
			res.Grant, res.Queue.Claim = res.Queue.Claims[0].Grant, res.Queue.Claims[0]
			return res
		}
		return Result{Err: fmt.Errorf("%w: the claim of request seq %d (token %d) has ended", fence.ErrStaleToken, seq, rep.token)}
	case replyQueued:
		if q := t.byName[strings.TrimPrefix(rep.name, queueReplyPrefix)]; q != nil && q.waiters.queuedBy(s.id, seq) {
			return Result{Session: s.id, Queued: true}
		}
		return Result{Session: s.id}
	case replyNotGranted:
		return Result{Session: s.id}
	}
	return Result{Err: fmt.Errorf("%w: request seq %d was already used for another request; every request needs its own seq", fence.ErrInvalidArgument, seq)}
}

// waiterTake is how many items waiter w takes when items are there: a
// batch claim up to its max_items, kept in its queued reply (replyItems),
// and no more than the room left under its owner's max_held (kept in the
// reply's token field by claimNext), but always one: a waiter admitted
// when it queued is never refused, as a lock's is not. A reply queued
// before the limit was kept has 0 there, and takes up to its max_items,
// as it did then.
func (t *queueTable) waiterTake(w waiter) int {
	if s := t.m.sessions[w.session]; s != nil {
		if rep, ok := s.replies.at(w.seq); ok {
			n := replyItems(rep)
			if limit := int(rep.token); limit > 0 && s.owner() != "" {
				n = min(n, max(limit-s.use.held, 1))
			}
			return n
		}
	}
	return 1
}

// waitHeldLimit is the max_held of quota that a waiting claim of session
// s keeps in its queued reply: 0 when s has no owner or quota has no
// max_held (no limit).
func waitHeldLimit(s *session, quota *statev1.Quota) fence.Token {
	if s.owner() == "" {
		return 0
	}
	return fence.Token(quota.GetMaxHeld())
}

// grantItem claims it for session s: it issues the claim's grant, binds
// it to s and counts the delivery. The caller records the reply and
// pushes the grant.
func (t *queueTable) grantItem(q *workQueue, it *queueItem, s *session, visMs int64) fence.Grant {
	m := t.m
	scope := ClaimScope(q.name, it.id)
	g := m.issueGrant(fence.KindClaim, q.name, scope, s.id, t.clock)
	g.TTL = msDuration(visMs)
	it.claimToken, it.claimSession, it.claimedAt, it.visibilityMs = g.Token, s.id, t.clock, visMs
	it.deliveries++
	s.hold(kindQueue, scope)
	t.claims[g.Token] = claimRef{q.name, it.id}
	t.started(g.Token, visMs)
	return g
}

func (t *queueTable) started(tok fence.Token, visMs int64) {
	if o, ok := t.m.obs.(ClaimObserver); ok {
		o.ClaimStarted(tok, msDuration(visMs))
	}
}

// wake hands available items to q's waiters, oldest item to the first
// waiter, while both last. It does what Machine.promote does for a lock,
// but a waiter waits on the queue's name and holds the claim's scope
// ("queue/item": a session may hold several claims of one queue), so the
// two bindings differ.
func (t *queueTable) wake(q *workQueue) {
	m := t.m
	// Granting an item makes none before it available: the scan goes on
	// from the item granted last instead of from the front each time.
	pos := 0
	for q.waiters.len() > 0 && !m.tokens.exhausted() {
		i, it := q.nextAvailable(t.clock, pos)
		if it == nil {
			return
		}
		pos = i
		w, _ := q.waiters.pop()
		s := m.sessions[w.session]
		s.unwait(kindQueue, q.name)
		vis := q.waitVis[w.session]
		delete(q.waitVis, w.session)
		most, n := t.waiterTake(w), 0
		var first fence.Token
		for ; it != nil && n < most && !m.tokens.exhausted(); pos, it = q.nextAvailable(t.clock, pos) {
			g := t.grantItem(q, it, s, vis)
			m.obs.Granted(g)
			if n++; n == 1 {
				first = g.Token
			}
		}
		ack := s.replies.holderOf(w.seq) // the outcomes of the claim's acks, kept
		s.replies.promote(w.seq, first, -int64(n))
		s.replies.setHolder(w.seq, ack)
	}
}

// held finds the item a claim token claims, or says why it cannot: an
// unknown queue or item, or a token that is not the item's current claim.
// It changes nothing.
func (t *queueTable) held(name string, item uint64, tok fence.Token) (*workQueue, *queueItem, error) {
	if err := ValidateQueueName(name); err != nil {
		return nil, nil, err
	}
	if item == 0 {
		return nil, nil, fmt.Errorf("%w: item is 0", fence.ErrInvalidArgument)
	}
	if err := fence.ValidateToken(tok); err != nil {
		return nil, nil, err
	}
	q := t.byName[name]
	if q == nil || item > q.lastItem {
		return nil, nil, fmt.Errorf("%w: queue %q has no item %d (never pushed)", fence.ErrInvalidArgument, name, item)
	}
	it := q.items[item]
	switch {
	case it == nil:
		return nil, nil, fmt.Errorf("%w: claim token %d of %s is stale: the item was acked or dead-lettered", fence.ErrStaleToken, tok, ClaimScope(name, item))
	case it.claimToken == 0:
		return nil, nil, fmt.Errorf("%w: claim token %d of %s is stale: the item is not claimed (its claim ended)", fence.ErrStaleToken, tok, ClaimScope(name, item))
	case it.claimToken != tok:
		return nil, nil, fmt.Errorf("%w: claim token %d of %s is stale: the item's current claim is token %d", fence.ErrStaleToken, tok, ClaimScope(name, item), it.claimToken)
	}
	return q, it, nil
}

// ackable is held for an ack (of QueueAck, a claim's acks or an ack
// batch). Under the ack-any-token test fault a claimed item is acked
// whatever token the ack presents (faults_on.go).
func (t *queueTable) ackable(name string, item uint64, tok fence.Token) (*workQueue, *queueItem, error) {
	q, it, err := t.held(name, item, tok)
	if errors.Is(err, fence.ErrStaleToken) && t.m.faults.anyAckToken() {
		if q = t.byName[name]; q != nil && q.items[item] != nil && q.items[item].claimToken != 0 {
			return q, q.items[item], nil
		}
	}
	return q, it, err
}

func (t *queueTable) ack(a *statev1.QueueAck, now int64) Result {
	q, it, err := t.ackable(a.GetQueue(), a.GetItem(), fence.Token(a.GetToken()))
	if err != nil {
		return Result{Err: err}
	}
	t.advance(now)
	sid := it.claimSession
	t.unclaim(q, it, Unlocked)
	t.remove(q, it.id)
	return Result{Session: sid, Queue: QueueResult{Item: it.id}}
}

func (t *queueTable) nack(n *statev1.QueueNack, now int64) Result {
	q, it, err := t.held(n.GetQueue(), n.GetItem(), fence.Token(n.GetToken()))
	if err != nil {
		return Result{Err: err}
	}
	if err := ValidateQueueDelayMillis(n.GetDelayMs()); err != nil {
		return Result{Err: err}
	}
	t.advance(now)
	t.giveBack(q, it, Unlocked, n.GetDelayMs())
	return Result{Queue: QueueResult{Item: it.id}}
}

func (t *queueTable) extend(e *statev1.QueueExtend, now int64) Result {
	q, it, err := t.held(e.GetQueue(), e.GetItem(), fence.Token(e.GetToken()))
	if err != nil {
		return Result{Err: err}
	}
	if err := ValidateVisibilityMillis(e.GetVisibilityMs()); err != nil {
		return Result{Err: err}
	}
	t.advance(now)
	it.visibilityMs = e.GetVisibilityMs()
	t.started(it.claimToken, it.visibilityMs)
	return Result{Session: it.claimSession, Granted: true, Grant: t.grantOf(q, it), Queue: QueueResult{Claim: t.info(q, it)}}
}

// expire ends a claim whose visibility timeout ran out on the leader's
// clock; ignored from an older term or for a claim that already ended.
func (t *queueTable) expire(e *statev1.ExpireClaim, now int64) Result {
	if e.GetTerm() < t.m.leaderTerm {
		return Result{Ignored: true}
	}
	ref, ok := t.claims[fence.Token(e.GetToken())]
	if !ok {
		return Result{Ignored: true}
	}
	t.advance(now)
	q := t.byName[ref.queue]
	t.giveBack(q, q.items[ref.item], Expired, 0)
	return Result{Queue: QueueResult{Item: ref.item}}
}

// unclaim ends it's claim: the grant ends and the session lets go of it.
// The caller removes it or gives it back (giveBack), which keeps
// q.claimedHead true.
func (t *queueTable) unclaim(q *workQueue, it *queueItem, reason EndReason) {
	m := t.m
	if s := m.sessions[it.claimSession]; s != nil {
		s.unhold(kindQueue, ClaimScope(q.name, it.id))
	}
	delete(t.claims, it.claimToken)
	m.endGrant(it.claimToken, reason)
	it.claimToken, it.claimSession, it.claimedAt, it.visibilityMs = 0, 0, 0, 0
}

// giveBack ends it's claim without an ack: the item goes back to q after
// delayMs, or to the dead-letter queue after its last delivery; then
// waiters get what is available.
func (t *queueTable) giveBack(q *workQueue, it *queueItem, reason EndReason, delayMs int64) {
	t.unclaim(q, it, reason)
	if i, _ := slices.BinarySearch(q.order, it.id); i < q.claimedHead {
		q.claimedHead = i // it is not claimed any more
	}
	if it.maxDeliveries > 0 && it.deliveries >= it.maxDeliveries {
		t.remove(q, it.id)
		dq := t.queue(q.name + DeadLetterSuffix)
		dq.lastItem++
		t.add(dq, &queueItem{id: dq.lastItem, payload: it.payload, enqueuedAt: t.clock, availableAt: t.clock, originItem: it.id})
		t.wake(dq)
	} else {
		it.availableAt = t.clock + delayMs
	}
	t.wake(q)
}

func (t *queueTable) cancelWait(c *statev1.QueueCancelWait) Result {
	m, sid := t.m, c.GetSession()
	if s := m.sessions[sid]; s != nil && c.GetSeq() > 0 {
		if rep, ok, _ := s.replies.get(c.GetSeq(), queueReplyName(c.GetQueue())); ok && rep.kind == replyGranted {
			return t.replay(s, c.GetSeq(), rep)
		}
	}
	q := t.byName[c.GetQueue()]
	if q == nil {
		return Result{Session: sid}
	}
	if m.leaveQueue(kindQueue, q.name, &q.waiters, m.sessions[sid]) {
		delete(q.waitVis, sid)
	}
	t.dropIfIdle(q)
	return Result{Session: sid}
}

// tick moves the queues' time to now and hands items whose delay ended to
// waiting claims, queue by queue in name order.
func (t *queueTable) tick(now int64) Result {
	t.advance(now)
	for _, name := range sortedKeys(t.byName) {
		t.wake(t.byName[name])
	}
	return Result{}
}

// endSession implements primitive: the session's waits end and its
// claims go back to their queues (dead-lettered after their last
// delivery).
func (t *queueTable) endSession(s *session, reason EndReason, now int64) {
	b := s.bound(kindQueue)
	if b.held.len() == 0 && b.waiting.len() == 0 {
		return
	}
	t.advance(now)
	b.end(func(name string) {
		q := t.byName[name]
		if t.m.leaveQueue(kindQueue, name, &q.waiters, s) {
			delete(q.waitVis, s.id)
		}
		t.dropIfIdle(q)
	}, func(scope string) {
		name, id, _ := parseClaimScope(scope)
		q := t.byName[name]
		t.giveBack(q, q.items[id], reason, 0)
	})
}

func (t *queueTable) grantOf(q *workQueue, it *queueItem) fence.Grant {
	g := t.m.grant(fence.KindClaim, q.name, ClaimScope(q.name, it.id), it.claimToken, it.claimSession, it.claimedAt)
	g.TTL = msDuration(it.visibilityMs)
	return g
}

// claimedInfo is info of item it, just claimed with grant g (grantItem's,
// which is what grantOf would make again).
func claimedInfo(q *workQueue, it *queueItem, g fence.Grant) ClaimInfo {
	return ClaimInfo{Queue: q.name, Item: it.id, Payload: it.payload, Deliveries: it.deliveries, MaxDeliveries: it.maxDeliveries, OriginItem: it.originItem, Grant: g, Visibility: g.TTL}
}

func (t *queueTable) info(q *workQueue, it *queueItem) ClaimInfo {
	ci := ClaimInfo{Queue: q.name, Item: it.id, Payload: it.payload, Deliveries: it.deliveries, MaxDeliveries: it.maxDeliveries, OriginItem: it.originItem}
	if it.claimToken != 0 {
		ci.Grant = t.grantOf(q, it)
		ci.Visibility = msDuration(it.visibilityMs)
	}
	return ci
}

// eachGrant implements primitive.
func (t *queueTable) eachGrant(fn func(tok fence.Token, g liveGrant)) {
	for _, q := range t.byName {
		for _, it := range q.items {
			if it.claimToken != 0 {
				fn(it.claimToken, liveGrant{kind: kindCode(fence.KindClaim), name: q.name, scope: ClaimScope(q.name, it.id), session: it.claimSession, issuedAt: it.claimedAt})
			}
		}
	}
}

// snapshot implements section.
func (t *queueTable) snapshot(st *statev1.State) {
	st.QueueClock = t.clock
	for _, name := range sortedKeys(t.byName) {
		q := t.byName[name]
		pq := &statev1.Queue{Name: q.name, LastItem: q.lastItem}
		for _, id := range q.order {
			it := q.items[id]
			pq.Items = append(pq.Items, &statev1.QueueItem{
				Id: it.id, Payload: it.payload, DedupeKey: it.dedupeKey, AvailableAtUnixMs: it.availableAt, Deliveries: it.deliveries,
				MaxDeliveries: it.maxDeliveries, ClaimToken: uint64(it.claimToken), ClaimSession: it.claimSession, ClaimedAtUnixMs: it.claimedAt,
				VisibilityMs: it.visibilityMs, EnqueuedAtUnixMs: it.enqueuedAt, OriginItem: it.originItem,
			})
		}
		for _, k := range q.dedupeOrder {
			pq.Dedupe = append(pq.Dedupe, &statev1.QueueDedupe{Key: k, Item: q.dedupe[k]})
		}
		for _, w := range q.waiters.list {
			pq.Waiters = append(pq.Waiters, &statev1.QueueWaiter{Session: w.session, Seq: w.seq, VisibilityMs: q.waitVis[w.session]})
		}
		st.Queues = append(st.Queues, pq)
	}
}

// restore implements section.
func (t *queueTable) restore(st *statev1.State) error {
	t.clock = st.GetQueueClock()
	for _, pq := range st.GetQueues() {
		if _, dup := t.byName[pq.GetName()]; dup {
			return fmt.Errorf("queue %q is listed twice", pq.GetName())
		}
		q := t.queue(pq.GetName())
		q.lastItem = pq.GetLastItem()
		for _, pi := range pq.GetItems() {
			it := &queueItem{
				id: pi.GetId(), payload: pi.GetPayload(), dedupeKey: pi.GetDedupeKey(), availableAt: pi.GetAvailableAtUnixMs(), deliveries: pi.GetDeliveries(),
				maxDeliveries: pi.GetMaxDeliveries(), claimToken: fence.Token(pi.GetClaimToken()), claimSession: pi.GetClaimSession(), claimedAt: pi.GetClaimedAtUnixMs(),
				visibilityMs: pi.GetVisibilityMs(), enqueuedAt: pi.GetEnqueuedAtUnixMs(), originItem: pi.GetOriginItem(),
			}
			if n := len(q.order); n > 0 && it.id <= q.order[n-1] {
				return fmt.Errorf("queue %q lists item %d after item %d", q.name, it.id, q.order[n-1])
			}
			t.add(q, it)
			if it.claimToken != 0 {
				s := t.m.sessions[it.claimSession]
				if s == nil {
					return fmt.Errorf("item %s is claimed by unknown session %d", ClaimScope(q.name, it.id), it.claimSession)
				}
				if _, dup := t.claims[it.claimToken]; dup {
					return fmt.Errorf("two items are claimed with token %d", it.claimToken)
				}
				s.hold(kindQueue, ClaimScope(q.name, it.id))
				t.claims[it.claimToken] = claimRef{q.name, it.id}
			}
		}
		for _, d := range pq.GetDedupe() {
			if _, dup := q.dedupe[d.GetKey()]; dup {
				return fmt.Errorf("queue %q lists dedupe key %q twice", q.name, d.GetKey())
			}
			q.dedupe[d.GetKey()] = d.GetItem()
			q.dedupeOrder = append(q.dedupeOrder, d.GetKey())
		}
		for _, w := range pq.GetWaiters() {
			s := t.m.sessions[w.GetSession()]
			if s == nil {
				return fmt.Errorf("queue %q has unknown waiter session %d", q.name, w.GetSession())
			}
			if !q.waiters.push(waiter{session: w.GetSession(), seq: w.GetSeq(), kind: fence.KindClaim}) {
				return fmt.Errorf("queue %q lists waiter session %d twice", q.name, w.GetSession())
			}
			s.wait(kindQueue, q.name)
			q.waitVis[w.GetSession()] = w.GetVisibilityMs()
		}
	}
	return nil
}

// check reports a queue that breaks the rules commands keep: items out of
// order or above the last id, a claim that is not a live session's, bound
// to it and indexed by its token, a payload above the limit, a dedupe
// table that disagrees with itself, a waiter that is not a live session
// bound to the queue or has no valid visibility, or an idle queue kept.
func (t *queueTable) check() error {
	m := t.m
	claimed := 0
	for name, q := range t.byName {
		if q.name != name {
			return broken("queue %q is filed under %q", q.name, name)
		}
		if err := storedName(name); err != nil {
			return broken("queue %q: %v", name, err)
		}
		if q.lastItem == 0 && len(q.items) == 0 && q.waiters.len() == 0 && len(q.dedupe) == 0 {
			return broken("queue %q is idle but kept", name)
		}
		if len(q.order) != len(q.items) {
			return broken("queue %q orders %d items but has %d", name, len(q.order), len(q.items))
		}
		if q.claimedHead > len(q.order) {
			return broken("queue %q counts %d claimed items at its front of %d", name, q.claimedHead, len(q.order))
		}
		for _, id := range q.order[:q.claimedHead] {
			if it := q.items[id]; it == nil || it.claimToken == 0 {
				return broken("queue %q counts item %d among the claimed items at its front, but it is not claimed", name, id)
			}
		}
		var prev uint64
		for _, id := range q.order {
			it := q.items[id]
			switch {
			case it == nil || it.id != id:
				return broken("queue %q orders item %d, which it does not have", name, id)
			case id <= prev || id > q.lastItem:
				return broken("queue %q has item %d out of order (after %d, last %d)", name, id, prev, q.lastItem)
			case len(it.payload) > MaxQueuePayloadBytes:
				return broken("item %s has a payload of %d bytes", ClaimScope(name, id), len(it.payload))
			case it.maxDeliveries > 0 && it.deliveries > it.maxDeliveries:
				return broken("item %s was delivered %d times, above its limit %d", ClaimScope(name, id), it.deliveries, it.maxDeliveries)
			}
			prev = id
			if it.claimToken == 0 {
				if it.claimSession != 0 || it.visibilityMs != 0 {
					return broken("item %s is not claimed but has a claim session or visibility", ClaimScope(name, id))
				}
				if it.maxDeliveries > 0 && it.deliveries >= it.maxDeliveries {
					return broken("item %s was delivered %d times (its limit) but is back in the queue", ClaimScope(name, id), it.deliveries)
				}
				continue
			}
			claimed++
			s := m.sessions[it.claimSession]
			switch {
			case s == nil:
				return broken("item %s is claimed by session %d, which is not live", ClaimScope(name, id), it.claimSession)
			case it.claimToken > m.tokens.last:
				return broken("item %s has claim token %d above the last token %d", ClaimScope(name, id), it.claimToken, m.tokens.last)
			case t.claims[it.claimToken] != claimRef{name, id}:
				return broken("item %s's claim token %d is indexed as %v", ClaimScope(name, id), it.claimToken, t.claims[it.claimToken])
			case ValidateVisibilityMillis(it.visibilityMs) != nil:
				return broken("item %s is claimed with visibility %dms", ClaimScope(name, id), it.visibilityMs)
			case it.deliveries == 0:
				return broken("item %s is claimed but counts no delivery", ClaimScope(name, id))
			}
			if !s.bound(kindQueue).held.has(ClaimScope(name, id)) {
				return broken("item %s is claimed by session %d, which is not bound to it", ClaimScope(name, id), it.claimSession)
			}
		}
		if len(q.dedupe) != len(q.dedupeOrder) {
			return broken("queue %q has %d dedupe keys in order and %d by key", name, len(q.dedupeOrder), len(q.dedupe))
		}
		for _, k := range q.dedupeOrder {
			if id, ok := q.dedupe[k]; !ok || id == 0 || id > q.lastItem {
				return broken("queue %q has dedupe key %q for item %d", name, k, id)
			}
		}
		if len(q.waitVis) != q.waiters.len() {
			return broken("queue %q has %d waiters and %d visibilities", name, q.waiters.len(), len(q.waitVis))
		}
		for _, w := range q.waiters.list {
			s := m.sessions[w.session]
			if s == nil {
				return broken("session %d waits to claim from %q but is not live", w.session, name)
			}
			if !s.bound(kindQueue).waiting.has(name) {
				return broken("session %d waits to claim from %q but is not bound to it", w.session, name)
			}
			if ValidateVisibilityMillis(q.waitVis[w.session]) != nil {
				return broken("session %d waits to claim from %q with visibility %dms", w.session, name, q.waitVis[w.session])
			}
		}
	}
	var items, bytes uint64
	for _, q := range t.byName {
		for _, it := range q.items {
			items++
			bytes += uint64(len(it.payload))
		}
	}
	if items != t.items || bytes != t.bytes {
		return broken("the queues count %d items of %d bytes but hold %d of %d", t.items, t.bytes, items, bytes)
	}
	if claimed != len(t.claims) {
		return broken("%d items are claimed but %d claims are indexed", claimed, len(t.claims))
	}
	for _, s := range m.checked.others {
		id, b := s.id, s.bound(kindQueue)
		for scope := range b.held.all() {
			name, item, ok := parseClaimScope(scope)
			q := t.byName[name]
			if !ok || q == nil || q.items[item] == nil || q.items[item].claimSession != id {
				return broken("session %d is bound as claimer of %s, which it does not claim", id, scope)
			}
		}
		for name := range b.waiting.all() {
			if q := t.byName[name]; q == nil || !q.waiters.has(id) {
				return broken("session %d is bound as waiter of queue %q, which does not queue it", id, name)
			}
		}
	}
	return nil
}

// QueueStats describes one queue.
type QueueStats struct {
	Name string
	// Exists is false for a queue that never had an item or waiter.
	Exists bool
	// Available items can be claimed now; Delayed ones after their delay;
	// Claimed ones are held by a live claim.
	Available, Delayed, Claimed int
	// Waiters are sessions waiting to claim.
	Waiters int
	// LastItem is the last item id given.
	LastItem uint64
	// Clock is the queues' time (Unix ms).
	Clock int64
}

// Queue returns a queue's stats.
func (m *Machine) Queue(name string) QueueStats {
	t := m.queues
	q := t.byName[name]
	st := QueueStats{Name: name, Clock: t.clock}
	if q == nil {
		return st
	}
	st.Exists, st.Waiters, st.LastItem = true, q.waiters.len(), q.lastItem
	for _, it := range q.items {
		switch {
		case it.claimToken != 0:
			st.Claimed++
		case it.availableAt <= t.clock:
			st.Available++
		default:
			st.Delayed++
		}
	}
	return st
}

// ItemInfo describes one item of a queue.
type ItemInfo struct {
	ClaimInfo
	// AvailableAt is when the item can be claimed (Unix ms, queue time).
	AvailableAt int64
	// EnqueuedAt is the queue time of its push.
	EnqueuedAt int64
	// Claimed reports a live claim (ClaimInfo.Grant).
	Claimed bool
}

// QueueItems returns up to limit items of a queue after item id after, in
// queue order.
func (m *Machine) QueueItems(name string, after uint64, limit int) []ItemInfo {
	t := m.queues
	q := t.byName[name]
	if q == nil {
		return nil
	}
	var out []ItemInfo
	for _, id := range q.order {
		if id <= after {
			continue
		}
		if len(out) >= limit {
			break
		}
		it := q.items[id]
		out = append(out, ItemInfo{ClaimInfo: t.info(q, it), AvailableAt: it.availableAt, EnqueuedAt: it.enqueuedAt, Claimed: it.claimToken != 0})
	}
	return out
}

// Claim returns the live claim with token tok.
func (m *Machine) Claim(tok fence.Token) (ClaimInfo, bool) {
	t := m.queues
	ref, ok := t.claims[tok]
	if !ok {
		return ClaimInfo{}, false
	}
	q := t.byName[ref.queue]
	return t.info(q, q.items[ref.item]), true
}

// ClaimOfRequest reports the claim request seq of session made on queue:
// the claim when it was granted and is live, whether it still waits.
func (m *Machine) ClaimOfRequest(session, seq uint64, queue string) (ClaimInfo, bool, bool) {
	s := m.sessions[session]
	if s == nil {
		return ClaimInfo{}, false, false
	}
	if rep, ok, _ := s.replies.get(seq, queueReplyName(queue)); ok && rep.kind == replyGranted {
		ci, live := m.Claim(rep.token)
		return ci, live, false
	}
	q := m.queues.byName[queue]
	return ClaimInfo{}, false, q != nil && q.waiters.queuedBy(session, seq)
}

// ClaimsOfRequest returns the live claims the claim request seq of
// session made on queue got (a batch claim's, several).
func (m *Machine) ClaimsOfRequest(session, seq uint64, queue string) []ClaimInfo {
	s := m.sessions[session]
	if s == nil {
		return nil
	}
	rep, ok, _ := s.replies.get(seq, queueReplyName(queue))
	if !ok || rep.kind != replyGranted {
		return nil
	}
	return m.queues.replay(s, seq, rep).Queue.Claims
}

// ClaimDeadline is a live claim's token and visibility timeout.
type ClaimDeadline struct {
	Token      fence.Token
	Visibility time.Duration
}

// Claims lists every live claim's visibility timeout, by token.
func (m *Machine) Claims() []ClaimDeadline {
	out := make([]ClaimDeadline, 0, len(m.queues.claims))
	for _, q := range m.queues.byName {
		for _, it := range q.items {
			if it.claimToken != 0 {
				out = append(out, ClaimDeadline{it.claimToken, msDuration(it.visibilityMs)})
			}
		}
	}
	return out
}

// QueueDue reports whether a queue has a waiter and an item whose delay
// ends by now (Unix ms): the leader then proposes a QueueTick.
func (m *Machine) QueueDue(now int64) bool {
	t := m.queues
	for _, q := range t.byName {
		if q.waiters.len() > 0 && q.firstAvailable(max(now, t.clock)) != nil {
			return true
		}
	}
	return false
}

// QueueItemCount returns the number of items in every queue.
func (m *Machine) QueueItemCount() int { return int(m.queues.items) }

// QueueBytes returns the payload bytes of every queue's items.
func (m *Machine) QueueBytes() int { return int(m.queues.bytes) }
