package client_test

import (
	"context"
	"errors"
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/guard"
	"github.com/fenced-dev/fenced/internal/testserver"
)

// TestSigningKeys: the grants the SDK returns (a Mutex's, granted at once
// and pushed to a waiter, and a TTLLock's, pipelined) carry the signed
// grant, which client.SigningKeys verifies; after RotateSigningKeys the
// new key signs and the old grant still verifies.
func TestSigningKeys(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, []string{srv.Addr()})
	ctx := testCtx(t)
	ks, err := c.SigningKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check := func(ks *fence.KeySet, g fence.Grant) fence.SignedGrant {
		t.Helper()
		sg, err := ks.VerifyGrant(g.Signed)
		if err != nil {
			t.Fatalf("grant %+v: %v", g, err)
		}
		if sg.Token != g.Token || sg.Scope != g.Scope || sg.Kind != g.Kind || sg.Issuer != g.Issuer {
			t.Fatalf("signed %+v, grant %+v", sg, g)
		}
		return sg
	}
	m1, m2 := client.NewMutex(newSession(t, c), "orders"), client.NewMutex(newSession(t, c), "orders")
	if err := m1.TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	first := m1.Grant()
	check(ks, first)
	locked := make(chan error, 1)
	go func() { locked <- m2.Lock(ctx) }()
	api := lockAPI(srv.Addr())
	eventually(t, "the second mutex to queue", func() bool { return len(waiters(t, api, "orders")) == 1 })
	if err := m1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-locked; err != nil {
		t.Fatal(err)
	}
	check(ks, m2.Grant())
	l, err := c.Acquire(ctx, "payments", fence.MinTTL*10)
	if err != nil {
		t.Fatal(err)
	}
	check(ks, l.Grant())

	k, dropped, err := c.RotateSigningKeys(ctx, 2, "test")
	if err != nil || k.ID == ks.Current() || len(dropped) != 0 {
		t.Fatalf("RotateSigningKeys=%v %v %v", k, dropped, err)
	}
	ks2, err := c.SigningKeys(ctx)
	if err != nil || ks2.Current() != k.ID {
		t.Fatalf("SigningKeys after the rotation: current %q, %v; want %s", ks2.Current(), err, k.ID)
	}
	check(ks2, first)
	l2, err := c.Acquire(ctx, "payments/2", fence.MinTTL*10)
	if err != nil {
		t.Fatal(err)
	}
	if sg := check(ks2, l2.Grant()); sg.KeyID != k.ID {
		t.Fatalf("signed by %s after the rotation, want %s", sg.KeyID, k.ID)
	}
	if _, _, err := c.RotateSigningKeys(ctx, 17, "x"); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Fatalf("RotateSigningKeys(keep 17)=%v", err)
	}

	// The helper attaches it: a Signed guard accepts the write in scope.
	out := guard.WithOutgoingGrant(ctx, "payments/2/x", l2.Grant())
	o, _ := guard.OutgoingFromContext(out)
	var mem guard.Memory
	in := guard.ContextWithGrant(context.Background(), o.Grant)
	if err := guard.Signed(&mem, ks2).Do(in, o.Object, o.Token, nil); err != nil {
		t.Fatalf("a write with the attached grant: %v", err)
	}
}
