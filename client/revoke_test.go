package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/testserver"
	"github.com/fenced-dev/fenced/server"
)

// A force-revoke reaches the holder at once: its Mutex's Context is
// cancelled within a second (its session's TTL is a minute, so no renewal
// is due), with a cause saying it was revoked; the waiter is granted with
// a higher token.
func TestRevoke_CancelsTheHoldersContextAtOnce(t *testing.T) {
	srv := testserver.Start(t, func(c *server.Config) { c.AllowRevoke = true })
	c := newClient(t, []string{srv.Addr()})
	ctx := context.Background()
	holder := newSession(t, c, client.WithTTL(time.Minute))
	m := client.NewMutex(holder, "rv")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	waiter := client.NewMutex(newSession(t, c, client.WithTTL(time.Minute)), "rv")
	locked := make(chan error, 1)
	go func() { locked <- waiter.Lock(ctx) }()

	// The holder's first renewal subscribes its stream to the session's
	// revocation; give it a moment to go out.
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	g, ok, err := c.Revoke(ctx, "rv", 0, "test")
	if err != nil || !ok || g.Token != m.Token() || g.Session != holder.ID() {
		t.Fatalf("Revoke: %+v %v %v, want the holder's grant", g, ok, err)
	}
	select {
	case <-m.Context().Done():
		t.Logf("the holder's context was cancelled %v after the revoke", time.Since(start).Round(time.Millisecond))
	case <-time.After(time.Second):
		t.Fatal("the holder's context was not cancelled within 1s of the revoke")
	}
	if cause := context.Cause(m.Context()); !errors.Is(cause, client.ErrRevoked) || !errors.Is(cause, fence.ErrLockLost) {
		t.Fatalf("cause %v, want ErrRevoked and fence.ErrLockLost", cause)
	}
	if err := <-locked; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	if waiter.Token() <= g.Token {
		t.Fatalf("waiter's token %d, want above the revoked %d", waiter.Token(), g.Token)
	}
	if _, ok, err := c.Revoke(ctx, "free", 0, "test"); err != nil || ok {
		t.Fatalf("revoke of a free lock: %v %v, want nothing revoked", ok, err)
	}
}

// Every request of the SDK carries the session's secret: the holder's
// session id with any other secret releases nothing.
func TestRelease_NeedsTheSecret(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, []string{srv.Addr()})
	ctx := context.Background()
	l, err := c.Acquire(ctx, "sec", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Secret()) != 32 {
		t.Fatalf("Secret() = %q, want 32 hexadecimal digits", l.Secret())
	}
	for _, secret := range []string{"", "00112233445566778899aabbccddeeff"} {
		if _, err := c.Release(ctx, "sec", l.Grant().Session, secret); !errors.Is(err, fence.ErrNotOwner) {
			t.Fatalf("release with secret %q: %v, want fence.ErrNotOwner", secret, err)
		}
	}
	if ok, _, err := c.Verify(ctx, "sec", l.Token()); err != nil || !ok {
		t.Fatalf("after refused releases the grant is not current: %v %v", ok, err)
	}
	if res, err := c.Release(ctx, "sec", l.Grant().Session, l.Secret()); err != nil || res != client.Released {
		t.Fatalf("release with the secret: %v %v", res, err)
	}
}
