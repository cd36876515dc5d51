package bench

import (
	"context"
	"testing"
)

// The semaphore workload's checks catch a semaphore that admits more
// holders than its capacity and hands a slot a lower token than its
// previous holder's (a negative control: a deliberately broken system).
func TestSemaphoreCheck_CatchesABrokenSemaphore(t *testing.T) {
	c := &semaphoreCheck{capacity: 1}
	ops := c.ops(1)
	ctx := context.Background()
	a, b := &brokenLocker{token: 10}, &brokenLocker{token: 5}
	if _, err := ops.acquire(ctx, a, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := ops.acquire(ctx, b, "s"); err != nil { // both hold slot 0 now
		t.Fatal(err)
	}
	if got := c.capacityViolations(); got != 1 {
		t.Errorf("capacity violations %d, want 1", got)
	}
	if got := c.tokenViolations(); got != 1 {
		t.Errorf("token order violations %d, want 1 (token 5 after 10 in slot 0)", got)
	}
	ops.release(ctx, a, "s")
	ops.release(ctx, b, "s")
	if _, err := ops.acquire(ctx, &brokenLocker{token: 11}, "s"); err != nil || c.capacityViolations() != 1 || c.tokenViolations() != 1 {
		t.Errorf("a correct next permit counted as a violation: %v %d %d", err, c.capacityViolations(), c.tokenViolations())
	}
}

// brokenLocker grants every permit at once, in slot 0, with its token.
type brokenLocker struct{ token uint64 }

func (l *brokenLocker) Lock(context.Context, string) (uint64, error) { return l.token, nil }
func (l *brokenLocker) Unlock(context.Context, string) error         { return nil }
func (l *brokenLocker) Close() error                                 { return nil }
func (l *brokenLocker) AcquirePermit(context.Context, string, int) (uint64, int, error) {
	return l.token, 0, nil
}
func (l *brokenLocker) ReleasePermit(context.Context, string) error { return nil }

// A system without slots (slot -1, etcd's and Redis's recipes) grants
// permits to concurrent holders in no one order: their tokens are not
// checked against each other, but the capacity still is.
func TestSemaphoreCheck_SlotlessTokensUnordered(t *testing.T) {
	c := &semaphoreCheck{capacity: 2}
	ops := c.ops(2)
	ctx := context.Background()
	for _, tok := range []uint64{10, 5, 7} {
		if _, err := ops.acquire(ctx, &slotlessLocker{brokenLocker{token: tok}}, "s"); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.tokenViolations(); got != 0 {
		t.Errorf("token order violations %d among slotless permits, want 0", got)
	}
	if got := c.capacityViolations(); got != 1 {
		t.Errorf("capacity violations %d, want 1 (3 holders of 2 permits)", got)
	}
}

// slotlessLocker grants every permit at once, without a slot.
type slotlessLocker struct{ brokenLocker }

func (l *slotlessLocker) AcquirePermit(context.Context, string, int) (uint64, int, error) {
	return l.token, -1, nil
}
