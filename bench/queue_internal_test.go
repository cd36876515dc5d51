package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// The queue workload's check catches a queue that redelivers an item
// with a claim token not above its earlier claim's, and counts the
// redelivery; a redelivery with a higher token is no violation.
func TestClaimTokens_CatchesALowerTokenOnRedelivery(t *testing.T) {
	var c claimTokens
	c.claimed("a", 10)
	c.claimed("b", 11)
	c.claimed("a", 12) // redelivered, higher: fine
	if c.violations.Load() != 0 || c.redeliveries.Load() != 1 {
		t.Fatalf("violations %d, redeliveries %d; want 0 and 1", c.violations.Load(), c.redeliveries.Load())
	}
	c.claimed("a", 12) // the same token again
	c.claimed("b", 9)  // lower
	if c.violations.Load() != 2 || c.redeliveries.Load() != 3 {
		t.Fatalf("violations %d, redeliveries %d; want 2 and 3", c.violations.Load(), c.redeliveries.Load())
	}
	c.acked("a")
	if _, ok := c.last["a"]; ok {
		t.Fatal("an acked item is still remembered")
	}
}

// A negative control of the whole workload: a queue whose first ack of
// every item fails and which then hands the item out again with a lower
// token makes the run report token order violations, redeliveries and
// the failed acks.
func TestRunQueue_CatchesABrokenQueue(t *testing.T) {
	sys := &brokenQueue{}
	r, err := Run(context.Background(), sys, Options{Workload: WorkloadQueue, Clients: 2, Duration: 300 * time.Millisecond})
	if err != nil && !errors.Is(err, errNoCycles) {
		t.Fatal(err)
	}
	if r.TokenOrderViolations == 0 || r.Redeliveries == 0 || r.Errors == 0 {
		t.Fatalf("result %+v: want token order violations, redeliveries and errors from the broken queue", r)
	}
}

// brokenQueue is an in-memory queue that fails the first ack of each
// item and redelivers it with a token below the one it had.
type brokenQueue struct {
	mu     sync.Mutex
	next   uint64
	items  []string
	tokens map[string]uint64
	acked  map[string]bool
}

func (q *brokenQueue) Name() string { return "broken-queue" }
func (q *brokenQueue) Close() error { return nil }
func (q *brokenQueue) NewLocker(context.Context, int, time.Duration) (Locker, error) {
	return &brokenQueueLocker{brokenLocker: brokenLocker{}, q: q}, nil
}

type brokenQueueLocker struct {
	brokenLocker
	q *brokenQueue
}

func (l *brokenQueueLocker) Push(_ context.Context, _ string, _ []byte) error {
	q := l.q
	q.mu.Lock()
	defer q.mu.Unlock()
	q.next++
	q.items = append(q.items, fmt.Sprint(q.next))
	return nil
}

func (l *brokenQueueLocker) Claim(ctx context.Context, _ string, _ time.Duration) (string, uint64, error) {
	q := l.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) == 0 {
		return "", 0, errors.New("empty")
	}
	item := q.items[0]
	q.items = q.items[1:]
	if q.tokens == nil {
		q.tokens, q.acked = map[string]uint64{}, map[string]bool{}
	}
	tok, ok := q.tokens[item]
	if !ok {
		tok = 1000000
	} else {
		tok-- // the bug: a redelivery with a lower token
	}
	q.tokens[item] = tok
	return item, tok, nil
}

func (l *brokenQueueLocker) Ack(_ context.Context, _, item string, _ uint64) error {
	q := l.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.acked[item] {
		q.acked[item] = true
		q.items = append([]string{item}, q.items...) // back, to be redelivered
		return errors.New("stale claim")
	}
	return nil
}
