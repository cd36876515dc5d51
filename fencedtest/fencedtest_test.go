package fencedtest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/fencedtest"
)

// ExpireSession ends a session that its client keeps renewing (its TTL
// would keep it 15s more): the renewals cannot save it, the
// next holder gets a higher token, and the client learns it lost the
// session.
func TestExpireSession_BeatsRenewals(t *testing.T) {
	srv := fencedtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := srv.Client(t)
	a, err := c.NewSession(ctx, client.WithTTL(15*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ma := client.NewMutex(a, "job")
	if err := ma.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	old := ma.Token()
	start := time.Now()
	if err := srv.ExpireSession(ctx, a.ID()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("ExpireSession took %v", d)
	}
	b, err := srv.Client(t).NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mb := client.NewMutex(b, "job")
	if err := mb.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if mb.Token() <= old {
		t.Fatalf("next holder's token %d, want above %d", mb.Token(), old)
	}
	select {
	case <-a.Done():
	case <-ctx.Done():
		t.Fatal("the expired session's client never learned it was lost")
	}
	if err := srv.ExpireSession(ctx, a.ID()); !errors.Is(err, fence.ErrSessionNotFound) {
		t.Fatalf("expiring it again: %v, want ErrSessionNotFound", err)
	}
}
