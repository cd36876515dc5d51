package server

import (
	"testing"

	fence "github.com/fenced-dev/fenced"
)

// Waits are keyed by kind: a grant or end of wait of a semaphore named
// "orders" never wakes the call waiting for the lock "orders" of the same
// session, and the lock's own grant does.
func TestWaits_KeyedByKind(t *testing.T) {
	w := newWaits()
	lockKey := waitKey{fence.KindLock, "orders", 7}
	ch := w.add(lockKey)
	defer w.remove(lockKey, ch)
	for _, k := range []fence.Kind{fence.KindPermit, fence.KindRead, fence.KindWrite, fence.KindLeader, fence.KindClaim} {
		w.notify(waitKey{k, "orders", 7}, waitOutcome{granted: true, grant: fence.Grant{Name: "orders", Kind: k, Token: 9}})
		w.notify(waitKey{k, "orders", 7}, waitOutcome{})
	}
	select {
	case out := <-ch:
		t.Fatalf("lock waiter woken by another kind: %+v", out)
	default:
	}
	w.notify(lockKey, waitOutcome{granted: true, grant: fence.Grant{Name: "orders", Kind: fence.KindLock, Token: 10}})
	select {
	case out := <-ch:
		if !out.granted || out.grant.Token != 10 {
			t.Fatalf("outcome %+v, want the lock grant 10", out)
		}
	default:
		t.Fatal("lock waiter not woken by its own grant")
	}
}
