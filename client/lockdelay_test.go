package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/testserver"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/server"
)

// waitGrant locks name on a new session of c and returns how long it
// took from start.
func waitGrant(t *testing.T, c *client.Client, name string, start time.Time) time.Duration {
	t.Helper()
	m := client.NewMutex(newSession(t, c), name)
	if err := m.Lock(testCtx(t)); err != nil {
		t.Fatalf("Lock(%q): %v", name, err)
	}
	return time.Since(start)
}

// A lease that expires with a lock delay keeps its lock from a waiter for
// the delay; one released cleanly does not. Describe shows the delay.
func TestLockDelay_AfterLeaseExpiry(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, []string{srv.Addr()})
	const ttl, delay = 300 * time.Millisecond, 1500 * time.Millisecond

	start := time.Now()
	if _, err := c.Acquire(testCtx(t), "delayed", ttl, client.WithLockDelay(delay)); err != nil {
		t.Fatal(err)
	}
	api := lockAPI(srv.Addr())
	eventually(t, "delay shown by Describe", func() bool {
		resp, err := api.Describe(testCtx(t), connect.NewRequest(&fencedv1.DescribeRequest{Name: "delayed"}))
		if err != nil {
			t.Fatal(err)
		}
		l := resp.Msg.GetLock()
		return l.GetDelayed() && l.GetDelayMs() == delay.Milliseconds() && l.GetHolder() == nil
	})
	if _, err := c.Acquire(testCtx(t), "delayed", ttl); !errors.Is(err, fence.ErrNotGranted) || !errors.Is(err, client.ErrLockDelayed) {
		t.Fatalf("Acquire during the delay: %v, want not granted, in its lock delay", err)
	}
	if got := waitGrant(t, c, "delayed", start); got < ttl+delay || got > ttl+delay+bound {
		t.Fatalf("waiter granted %v after the first acquire, want at least ttl+delay %v (and within %v more)", got, ttl+delay, bound)
	}

	// A clean release starts no delay.
	l, err := c.Acquire(testCtx(t), "released", time.Minute, client.WithLockDelay(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if got := waitGrant(t, c, "released", start); got > 30*time.Second {
		t.Fatalf("waiter granted %v after a clean release, want no delay (1 minute asked)", got)
	}
}

// The server's default delay applies to an acquire that asks for none;
// WithLockDelay(0) turns it off.
func TestLockDelay_ServerDefault(t *testing.T) {
	srv := testserver.Start(t, func(c *server.Config) { c.LockDelay = time.Minute })
	c := newClient(t, []string{srv.Addr()})
	if _, err := c.Acquire(testCtx(t), "default", 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(testCtx(t), "off", 200*time.Millisecond, client.WithLockDelay(0)); err != nil {
		t.Fatal(err)
	}
	waitGrant(t, c, "off", time.Now())
	api := lockAPI(srv.Addr())
	resp, err := api.Describe(testCtx(t), connect.NewRequest(&fencedv1.DescribeRequest{Name: "default"}))
	if err != nil {
		t.Fatal(err)
	}
	if l := resp.Msg.GetLock(); !l.GetDelayed() || l.GetDelayMs() != time.Minute.Milliseconds() {
		t.Fatalf("Describe(default)=%v, want in a delay of one minute", l)
	}
	if _, err := c.Acquire(testCtx(t), "x", time.Second, client.WithLockDelay(time.Minute+time.Millisecond)); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Fatalf("WithLockDelay above the maximum: %v, want fence.ErrInvalidArgument", err)
	}
	over := int64(60001)
	if _, err := api.Acquire(testCtx(t), connect.NewRequest(&fencedv1.AcquireRequest{Name: "x", TtlMs: 1000, LockDelayMs: &over})); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("Acquire with lock_delay_ms 60001: %v, want InvalidArgument", err)
	}
	if _, err := server.Start(func() server.Config {
		cfg := server.DefaultConfig()
		cfg.LockDelay = time.Minute + time.Second
		return cfg
	}()); err == nil {
		t.Fatal("server started with a lock delay above one minute")
	}
}

// A force-revoke is not a clean end: the revoked grant's delay applies.
func TestLockDelay_AfterRevoke(t *testing.T) {
	srv := testserver.Start(t, func(c *server.Config) { c.AllowRevoke = true })
	c := newClient(t, []string{srv.Addr()})
	const delay = 1500 * time.Millisecond
	m := client.NewMutex(newSession(t, c), "revoked", client.WithLockDelay(delay))
	if err := m.Lock(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, ok, err := c.Revoke(testCtx(t), "revoked", m.Token(), "test"); err != nil || !ok {
		t.Fatalf("Revoke: %v %v", ok, err)
	}
	if got := waitGrant(t, c, "revoked", start); got < delay || got > delay+bound {
		t.Fatalf("waiter granted %v after the revoke, want at least the delay %v (and within %v more)", got, delay, bound)
	}
}

// A release naming session 0 (no session, no request id) with any well
// formed secret, which any caller can send, does not pass for the release of a lock in its delay:
// the waiter stays queued and the lock ungranted until the delay ends.
func TestLockDelay_ReleaseBySessionZero(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, []string{srv.Addr()})
	if _, err := c.Acquire(testCtx(t), "x", 200*time.Millisecond, client.WithLockDelay(time.Minute)); err != nil {
		t.Fatal(err)
	}
	api := lockAPI(srv.Addr())
	describe := func() *fencedv1.LockInfo {
		resp, err := api.Describe(testCtx(t), connect.NewRequest(&fencedv1.DescribeRequest{Name: "x"}))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Msg.GetLock()
	}
	eventually(t, "lock in its delay", func() bool { return describe().GetDelayed() })
	m := client.NewMutex(newSession(t, c), "x")
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan error, 1)
	go func() { done <- m.Lock(ctx) }()
	eventually(t, "waiter queued", func() bool { return describe().GetWaiterCount() == 1 })

	resp, err := api.Release(testCtx(t), connect.NewRequest(&fencedv1.ReleaseRequest{Name: "x", Secret: strings.Repeat("0", 32)}))
	if err != nil || resp.Msg.GetResult() != fencedv1.ReleaseResult_RELEASE_RESULT_ALREADY_RELEASED {
		t.Fatalf("Release by session 0: %v %v, want already released", resp, err)
	}
	if l := describe(); l.GetHolder() != nil || !l.GetDelayed() || l.GetWaiterCount() != 1 {
		t.Fatalf("after a release by session 0 Describe=%v, want still in its delay, no holder, the waiter queued", l)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("waiter granted the lock during its delay")
	}
}
