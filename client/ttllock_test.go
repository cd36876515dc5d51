package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/faultproxy"
	"github.com/fenced-dev/fenced/internal/testserver"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// TestClient_AcquireExpires checks a TTL lock: its Context ends by
// its TTL, and another client gets the lock only after that.
func TestClient_AcquireExpires(t *testing.T) {
	srv := testserver.Start(t)
	c1 := newClient(t, []string{srv.Addr()})
	c2 := newClient(t, []string{srv.Addr()})
	const ttl = time.Second

	before := time.Now()
	l, err := c1.Acquire(testCtx(t), "lease", ttl)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if !l.Token().Valid() {
		t.Errorf("Token() = %v, want a valid token", l.Token())
	}
	if g := l.Grant(); g.Name != "lease" || g.Token != l.Token() || g.Session == 0 || g.TTL != ttl {
		t.Errorf("Grant() = %+v, want name lease, token %v, a session and TTL %v", g, l.Token(), ttl)
	}
	if vu := l.ValidUntil(); vu.After(before.Add(ttl)) {
		t.Errorf("ValidUntil() = %v, after sent+ttl %v", vu, before.Add(ttl))
	}
	if err := l.Context().Err(); err != nil {
		t.Fatalf("Context() of a new TTL lock: %v", err)
	}

	var l2 *client.TTLLock
	eventually(t, "second acquire", func() bool {
		var err error
		l2, err = c2.Acquire(testCtx(t), "lease", ttl)
		if errors.Is(err, fence.ErrNotGranted) {
			return false
		}
		if err != nil {
			t.Fatalf("second Acquire: %v", err)
		}
		// Granted to c2: c1 must already have given the lock up.
		if l.Context().Err() == nil {
			t.Errorf("the lock was granted again while the first TTL lock's Context() was alive")
		}
		return true
	})
	within(t, "TTL lock Context", l.Context().Done())
	if err := context.Cause(l.Context()); !errors.Is(err, fence.ErrLockLost) || !errors.Is(err, client.ErrExpired) {
		t.Errorf("Context() cause = %v, want fence.ErrLockLost and client.ErrExpired", err)
	}
	if l2.Token() <= l.Token() {
		t.Errorf("second TTL lock's Token() = %v, want > %v", l2.Token(), l.Token())
	}
	// Releasing the expired TTL lock does not touch the new holder.
	if err := l.Release(testCtx(t)); !errors.Is(err, client.ErrNotOwned) {
		t.Errorf("Release of an expired TTL lock = %v, want client.ErrNotOwned", err)
	}
	if err := l2.Context().Err(); err != nil {
		t.Errorf("new TTL lock's Context(): %v", err)
	}
}

func TestTTLLock_Release(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, []string{srv.Addr()})
	l, err := c.Acquire(testCtx(t), "release", time.Minute)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if _, err := c.Acquire(testCtx(t), "release", time.Minute); !errors.Is(err, fence.ErrNotGranted) {
		t.Errorf("Acquire of a held lock = %v, want fence.ErrNotGranted", err)
	}
	// A session's TryLock sees it held too.
	m := client.NewMutex(newSession(t, c), "release")
	if err := m.TryLock(testCtx(t)); !errors.Is(err, fence.ErrNotGranted) {
		t.Errorf("TryLock of a TTL-locked lock = %v, want fence.ErrNotGranted", err)
	}

	if err := l.Release(testCtx(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := context.Cause(l.Context()); !errors.Is(err, client.ErrNotHeld) {
		t.Errorf("Context() cause after Release = %v, want client.ErrNotHeld", err)
	}
	if err := l.Release(testCtx(t)); err != nil {
		t.Errorf("second Release: %v", err)
	}
	if err := m.TryLock(testCtx(t)); err != nil {
		t.Fatalf("TryLock after Release: %v", err)
	}
	if m.Token() <= l.Token() {
		t.Errorf("Token() after the TTL lock = %v, want > %v", m.Token(), l.Token())
	}
}

// TestClient_AcquireRetryAppliedOnce loses the answer to an acquire: the
// retry carries the same request id, so the server answers it with the
// original grant instead of refusing a second acquire.
func TestClient_AcquireRetryAppliedOnce(t *testing.T) {
	srv := testserver.Start(t)
	api := lockAPI(srv.Addr())
	p, err := faultproxy.New(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := newClient(t, []string{p.Addr()}, client.WithRequestTimeout(300*time.Millisecond))
	// Open the connection while the link works.
	warm, err := c.Acquire(testCtx(t), "warm-up", time.Second)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	warm.Release(testCtx(t))

	p.SetOneWay(faultproxy.ServerToClient, true)
	type result struct {
		l   *client.TTLLock
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := c.Acquire(testCtx(t), "once", 10*time.Second)
		done <- result{l, err}
	}()
	var holder *fencedv1.Grant
	eventually(t, "grant applied on the server", func() bool {
		resp, err := api.Describe(testCtx(t), connect.NewRequest(&fencedv1.DescribeRequest{Name: "once"}))
		if err != nil {
			t.Fatalf("Describe: %v", err)
		}
		holder = resp.Msg.GetLock().GetHolder()
		return holder.GetToken() != 0
	})
	p.SetOneWay(faultproxy.ServerToClient, false)

	var r result
	select {
	case r = <-done:
	case <-time.After(bound):
		t.Fatalf("Acquire did not return within %v", bound)
	}
	if r.err != nil {
		t.Fatalf("Acquire with a lost answer: %v", r.err)
	}
	if got, want := r.l.Token(), fence.Token(holder.GetToken()); got != want {
		t.Errorf("Token() = %v, want the server's grant %v", got, want)
	}
	if got, want := r.l.Grant().Session, holder.GetSession(); got != want {
		t.Errorf("Grant().Session = %d, want the server's holder %d", got, want)
	}
	if err := r.l.Release(testCtx(t)); err != nil {
		t.Errorf("Release: %v", err)
	}
}
