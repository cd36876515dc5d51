package pggrant

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	fence "github.com/fenced-dev/fenced"
)

// DefaultMaxDeliveries is how many times a queue delivers an item that is
// never acknowledged before it moves it to the dead letters, unless
// WithMaxDeliveries says otherwise.
const DefaultMaxDeliveries = 5

// MaxMaxDeliveries bounds WithMaxDeliveries.
const MaxMaxDeliveries = 1000

// Queue is a work queue kept in the table fence_work_claims: items are
// claimed by one worker at a time with a claim token and a visibility
// timeout (the claim's TTL), found with FOR UPDATE SKIP LOCKED so that
// workers never wait on each other's rows. The claim token is the item's
// fencing token: it rises with every claim of the item, across expiry and
// restart, and a resource fences writes for the item under the scope
// "queue/item". Ack, Nack and Extend need the current claim token; an
// expired claim returns the item, whose next claim has a higher token; an
// item delivered MaxDeliveries times without an Ack becomes a dead
// letter. The item's key is the producer's de-duplication key.
//
// Claims are not renewed in the background: Extend when the work needs
// more time.
type Queue struct {
	g             *Grantor
	name          string
	maxDeliveries int
}

// A QueueOption configures a Queue.
type QueueOption func(*Queue)

// WithMaxDeliveries sets how many deliveries without an Ack an item gets
// before it becomes a dead letter, 1..MaxMaxDeliveries (default
// DefaultMaxDeliveries).
func WithMaxDeliveries(n int) QueueOption { return func(q *Queue) { q.maxDeliveries = n } }

// Queue returns the work queue name. It writes nothing; an invalid name
// or option is an error wrapping fence.ErrInvalidArgument.
func (g *Grantor) Queue(name string, opts ...QueueOption) (*Queue, error) {
	q := &Queue{g: g, name: name, maxDeliveries: DefaultMaxDeliveries}
	for _, o := range opts {
		o(q)
	}
	if err := fence.ValidateName(name); err != nil {
		return nil, fmt.Errorf("pggrant: queue: %w", err)
	}
	if q.maxDeliveries < 1 || q.maxDeliveries > MaxMaxDeliveries {
		return nil, fmt.Errorf("pggrant: queue %q: %w: max deliveries %d is outside 1..%d", name, fence.ErrInvalidArgument, q.maxDeliveries, MaxMaxDeliveries)
	}
	return q, nil
}

// wakeKey is the notification payload that wakes the queue's waiting
// claimers (lock names are notified by name; a lock named like this only
// gets a spurious wake-up).
func (q *Queue) wakeKey() string { return "queue:" + q.name }

// Enqueue adds item with payload, ready to be claimed, and notifies the
// waiting claimers. item is the producer's de-duplication key: if the
// queue already has an item with it (in any state, done and dead
// included), Enqueue changes nothing and returns false.
func (q *Queue) Enqueue(ctx context.Context, item string, payload []byte) (bool, error) {
	if err := fence.ValidateName(item); err != nil {
		return false, fmt.Errorf("pggrant: enqueue to %q: item: %w", q.name, err)
	}
	if payload == nil {
		payload = []byte{}
	}
	var added bool
	err := q.g.pool.QueryRow(ctx, `
WITH i AS (
	INSERT INTO fence_work_claims (queue, item, payload) VALUES ($1, $2, $3)
	ON CONFLICT (queue, item) DO NOTHING RETURNING item
), n AS (SELECT pg_notify('`+channel+`', $4) FROM i)
SELECT (SELECT count(*) FROM n) > 0`, q.name, item, payload, q.wakeKey()).Scan(&added)
	if err != nil {
		return false, fmt.Errorf("pggrant: enqueue %q to %q: %w", item, q.name, err)
	}
	return added, nil
}

// claimSQL claims the oldest ready item that is not claimed or whose
// claim expired, skipping rows other claimers have locked, and raises its
// claim token, in one statement on the database's clock.
const claimSQL = `
WITH c AS (
	SELECT queue, item FROM fence_work_claims
	WHERE queue = $1 AND state = 'ready' AND (claimed_by IS NULL OR expires_at <= now())
	ORDER BY enqueued_at, item
	LIMIT 1
	FOR UPDATE SKIP LOCKED
)
UPDATE fence_work_claims w
SET claimed_by = $2, claim_token = w.claim_token + 1, deliveries = w.deliveries + 1,
	expires_at = now() + $3 * interval '1 millisecond'
FROM c WHERE w.queue = c.queue AND w.item = c.item
RETURNING w.item, w.payload, w.claim_token, w.deliveries, now()`

// deadSQL moves the items whose last delivery expired and which had
// their last allowed delivery to the dead letters.
const deadSQL = `UPDATE fence_work_claims SET state = 'dead', claimed_by = NULL
	WHERE queue = $1 AND state = 'ready' AND claimed_by IS NOT NULL AND expires_at <= now() AND deliveries >= $2`

// Claim claims the oldest ready item for the TTL of opts (its visibility
// timeout, fence.WithTTL; default fence.DefaultGrantTTL). Without
// fence.Wait it returns an error wrapping fence.ErrNotGranted when no
// item is ready; with it, it waits until one is, woken by Enqueue and
// Nack notifications (and at the earliest claim expiry or the re-check
// interval).
func (q *Queue) Claim(ctx context.Context, opts ...fence.AcquireOption) (*Claim, error) {
	o, err := fence.AcquireOptionsOf(opts...)
	if err != nil {
		return nil, fmt.Errorf("pggrant: claim from %q: %w", q.name, err)
	}
	var wake <-chan struct{}
	if o.Wait {
		w, stop := q.g.lis.watch(q.wakeKey())
		defer stop()
		wake = w
	}
	for {
		c, err := q.try(ctx, o.TTL)
		if err != nil || c != nil {
			return c, err
		}
		if !o.Wait {
			return nil, fmt.Errorf("pggrant: claim from %q: %w: no item is ready", q.name, fence.ErrNotGranted)
		}
		sleep := q.g.recheck
		var leftMs *float64
		if err := q.g.pool.QueryRow(ctx, `SELECT extract(epoch FROM min(expires_at) - now()) * 1000 FROM fence_work_claims
			WHERE queue = $1 AND state = 'ready' AND claimed_by IS NOT NULL`, q.name).Scan(&leftMs); err == nil && leftMs != nil {
			sleep = min(sleep, time.Duration(max(*leftMs, 0)*float64(time.Millisecond))+time.Millisecond)
		}
		t := time.NewTimer(sleep)
		select {
		case <-wake:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("pggrant: claim from %q: %w", q.name, ctx.Err())
		}
		t.Stop()
	}
}

func (q *Queue) try(ctx context.Context, ttl time.Duration) (*Claim, error) {
	if _, err := q.g.pool.Exec(ctx, deadSQL, q.name, q.maxDeliveries); err != nil {
		return nil, fmt.Errorf("pggrant: claim from %q: %w", q.name, err)
	}
	c := &Claim{q: q, holder: randomHex(), ttl: ttl}
	var tok int64
	var at time.Time
	err := q.g.pool.QueryRow(ctx, claimSQL, q.name, c.holder, ttl.Milliseconds()).Scan(&c.item, &c.payload, &tok, &c.deliveries, &at)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("pggrant: claim from %q: %w", q.name, err)
	}
	c.grant = fence.Grant{
		Name: q.name, Kind: fence.KindClaim, Scope: q.name + "/" + c.item, Token: fence.Token(tok),
		Issuer: q.g.issuer, TTL: ttl, IssuedAt: at.UTC(),
	}
	return c, nil
}

// Claim is a claimed item of a Queue.
type Claim struct {
	q          *Queue
	holder     string
	ttl        time.Duration
	item       string
	payload    []byte
	deliveries int
	grant      fence.Grant
}

// Grant returns the claim's grant: Kind fence.KindClaim, Scope
// "queue/item", Token the claim token to fence the item's writes with.
func (c *Claim) Grant() fence.Grant { return c.grant }

// Item returns the item's key.
func (c *Claim) Item() string { return c.item }

// Payload returns the item's payload.
func (c *Claim) Payload() []byte { return c.payload }

// Deliveries returns how many times the item was claimed, this claim
// included.
func (c *Claim) Deliveries() int { return c.deliveries }

// current is the condition of a claim still in force.
const current = `queue = $1 AND item = $2 AND claimed_by = $3 AND claim_token = $4 AND state = 'ready' AND expires_at > now()`

// Ack marks the item done. It fails with an error wrapping
// fence.ErrLockLost, changing nothing, when the claim is no longer in
// force (it expired, and the item may have been claimed again).
func (c *Claim) Ack(ctx context.Context) error {
	return c.change(ctx, "ack", `UPDATE fence_work_claims SET state = 'done', claimed_by = NULL WHERE `+current)
}

// Nack gives the item back at once, for the next claim (a dead letter if
// it had its last allowed delivery), and wakes the waiting claimers. It
// fails like Ack.
func (c *Claim) Nack(ctx context.Context) error {
	return c.change(ctx, "nack", `
WITH r AS (
	UPDATE fence_work_claims SET claimed_by = NULL, expires_at = NULL,
		state = CASE WHEN deliveries >= $6 THEN 'dead' ELSE 'ready' END
	WHERE `+current+` RETURNING 1
), n AS (SELECT pg_notify('`+channel+`', $5) FROM r)
SELECT count(*) FROM n`, c.q.wakeKey(), c.q.maxDeliveries)
}

// Extend sets the claim's visibility timeout to ttl from the database's
// now, keeping its token. It fails like Ack; a ttl outside
// fence.MinTTL..fence.MaxTTL is an error wrapping fence.ErrInvalidArgument
// and changes nothing.
func (c *Claim) Extend(ctx context.Context, ttl time.Duration) error {
	if err := fence.ValidateTTL(ttl); err != nil {
		return fmt.Errorf("pggrant: extend claim %s: %w", c.grant.Scope, err)
	}
	return c.change(ctx, "extend", `UPDATE fence_work_claims SET expires_at = now() + $5 * interval '1 millisecond' WHERE `+current, ttl.Milliseconds())
}

// change runs a statement on the claim's row if it is still in force.
func (c *Claim) change(ctx context.Context, op, sql string, extra ...any) error {
	args := append([]any{c.q.name, c.item, c.holder, int64(c.grant.Token)}, extra...)
	var n int64
	var err error
	if op == "nack" {
		err = c.q.g.pool.QueryRow(ctx, sql, args...).Scan(&n)
	} else {
		n, err = exec(ctx, c.q.g.pool, sql, args...)
	}
	switch {
	case err != nil:
		return fmt.Errorf("pggrant: %s claim %s (token %d): %w", op, c.grant.Scope, c.grant.Token, err)
	case n == 0:
		return fmt.Errorf("pggrant: %s claim %s (token %d): %w: the claim is no longer in force (it expired, and the item may have been claimed again)", op, c.grant.Scope, c.grant.Token, fence.ErrLockLost)
	}
	return nil
}

// DeadLetters returns the keys of the queue's dead letters, oldest first.
func (q *Queue) DeadLetters(ctx context.Context) ([]string, error) {
	rows, _ := q.g.pool.Query(ctx, `SELECT item FROM fence_work_claims WHERE queue = $1 AND state = 'dead' ORDER BY enqueued_at, item`, q.name)
	items, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("pggrant: dead letters of %q: %w", q.name, err)
	}
	return items, nil
}

// Name returns the queue's name.
func (q *Queue) Name() string { return q.name }
