package client_test

import (
	"errors"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/testserver"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// A renewed lease outlives its first TTL under the same token, and nobody
// else gets the lock meanwhile; once renewals stop it ends with its TTL.
func TestLease_RenewKeepsToken(t *testing.T) {
	srv := testserver.Start(t)
	c1, c2 := newClient(t, []string{srv.Addr()}), newClient(t, []string{srv.Addr()})
	l, err := c1.Acquire(testCtx(t), "renewed", 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	tok, first := l.Token(), l.ValidUntil()
	end := time.Now().Add(2 * time.Second) // four first TTLs
	for time.Now().Before(end) {
		if err := l.Renew(testCtx(t), 600*time.Millisecond); err != nil {
			t.Fatalf("Renew: %v", err)
		}
		if _, err := c2.Acquire(testCtx(t), "renewed", time.Second); !errors.Is(err, fence.ErrNotGranted) {
			t.Fatalf("another Acquire while the lease is renewed: %v, want not granted", err)
		}
		time.Sleep(150 * time.Millisecond)
	}
	if l.Token() != tok || l.Grant().TTL != 600*time.Millisecond {
		t.Fatalf("after renewals Token()=%d TTL=%v, want %d and 600ms", l.Token(), l.Grant().TTL, tok)
	}
	if !l.ValidUntil().After(first) || l.Remaining() <= 0 || l.Remaining() > 600*time.Millisecond {
		t.Fatalf("ValidUntil()=%v (first %v), Remaining()=%v", l.ValidUntil(), first, l.Remaining())
	}
	if err := l.Context().Err(); err != nil {
		t.Fatalf("Context() of a renewed lease: %v", err)
	}
	within(t, "lease Context after renewals stopped", l.Context().Done())
	if l.Remaining() != 0 {
		t.Fatalf("Remaining()=%v after the lease ran out, want 0", l.Remaining())
	}
	var l2 *client.Lease
	eventually(t, "acquire after the lease ran out", func() bool {
		l2, err = c2.Acquire(testCtx(t), "renewed", time.Second)
		return err == nil
	})
	if l2.Token() <= tok {
		t.Fatalf("next Token()=%d, want above %d", l2.Token(), tok)
	}
	// The old lease is gone: renewing it fails and says so.
	if err := l.Renew(testCtx(t), 0); !errors.Is(err, fence.ErrLockLost) {
		t.Fatalf("Renew of a lost lease: %v, want fence.ErrLockLost", err)
	}
}

// A renewal with a shorter TTL lowers ValidUntil at once, and the server
// lets the lock go by the shorter TTL.
func TestLease_RenewShorter(t *testing.T) {
	srv := testserver.Start(t)
	c1, c2 := newClient(t, []string{srv.Addr()}), newClient(t, []string{srv.Addr()})
	l, err := c1.Acquire(testCtx(t), "shorter", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	if err := l.Renew(testCtx(t), 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if vu := l.ValidUntil(); vu.After(time.Now().Add(300 * time.Millisecond)) {
		t.Fatalf("ValidUntil()=%v, after now+300ms", vu)
	}
	eventually(t, "acquire after the shorter TTL", func() bool {
		_, err := c2.Acquire(testCtx(t), "shorter", time.Second)
		return err == nil
	})
	if held := time.Since(sent); held < 300*time.Millisecond {
		t.Fatalf("granted again %v after the renewal, before its TTL of 300ms", held)
	}
}

// Renewing a grant one does not own is not_owned and changes nothing; a
// wrong secret is refused; bad input is refused before anything is sent.
func TestLease_RenewNotOwned(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, []string{srv.Addr()})
	mine, err := c.Acquire(testCtx(t), "mine", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	other, err := c.Acquire(testCtx(t), "other", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	api := lockAPI(srv.Addr())
	status := func() *fencedv1.StatusResponse {
		resp, err := api.Status(testCtx(t), connect.NewRequest(&fencedv1.StatusRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		resp.Msg.AppliedIndex, resp.Msg.Term = 0, 0
		return resp.Msg
	}
	before := status()
	// other's session renewing mine's lock: not owned.
	resp, err := api.Renew(testCtx(t), connect.NewRequest(&fencedv1.RenewRequest{Name: "mine", Session: other.Grant().Session, Secret: other.Secret(), TtlMs: 5000}))
	if err != nil || resp.Msg.GetResult() != fencedv1.RenewResult_RENEW_RESULT_NOT_OWNED || resp.Msg.GetGrant() != nil {
		t.Fatalf("Renew by another session = %v, %v; want NOT_OWNED", resp, err)
	}
	// The right session under another token: not owned.
	resp, err = api.Renew(testCtx(t), connect.NewRequest(&fencedv1.RenewRequest{Name: "mine", Session: mine.Grant().Session, Secret: mine.Secret(), Token: uint64(mine.Token()) + 1}))
	if err != nil || resp.Msg.GetResult() != fencedv1.RenewResult_RENEW_RESULT_NOT_OWNED {
		t.Fatalf("Renew under another token = %v, %v; want NOT_OWNED", resp, err)
	}
	// The right session with a wrong secret: refused.
	_, err = api.Renew(testCtx(t), connect.NewRequest(&fencedv1.RenewRequest{Name: "mine", Session: mine.Grant().Session, Secret: other.Secret()}))
	if connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("Renew with another session's secret: %v, want PermissionDenied", err)
	}
	for _, bad := range []*fencedv1.RenewRequest{
		{Name: "mine", Session: mine.Grant().Session, Secret: mine.Secret(), TtlMs: 99},
		{Name: "mine", Session: 0, Secret: mine.Secret()},
		{Name: "", Session: mine.Grant().Session, Secret: mine.Secret()},
	} {
		if _, err := api.Renew(testCtx(t), connect.NewRequest(bad)); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Fatalf("Renew(%v): %v, want InvalidArgument", bad, err)
		}
	}
	if after := status(); !proto.Equal(before, after) {
		t.Fatalf("refused renewals changed the state:\nbefore %v\nafter  %v", before, after)
	}
	if err := mine.Renew(testCtx(t), 50*time.Millisecond); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Fatalf("Renew(50ms): %v, want fence.ErrInvalidArgument", err)
	}
	if err := mine.Release(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := mine.Renew(testCtx(t), 0); !errors.Is(err, client.ErrNotHeld) {
		t.Fatalf("Renew after Release: %v, want ErrNotHeld", err)
	}
}

// Every grant type says how long the client trusts it: a Mutex its
// session's validity, a Lease its own.
func TestValidity_EveryGrant(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, []string{srv.Addr()})
	s := newSession(t, c, client.WithTTL(2*time.Second))
	m := client.NewMutex(s, "v")
	if err := m.Lock(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if m.ValidUntil() != s.ValidUntil() || m.Remaining() <= 0 || m.Remaining() > 2*time.Second || s.Remaining() <= 0 {
		t.Fatalf("Mutex ValidUntil()=%v Remaining()=%v, session %v %v", m.ValidUntil(), m.Remaining(), s.ValidUntil(), s.Remaining())
	}
	before := time.Now()
	l, err := c.Acquire(testCtx(t), "w", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.ValidUntil().After(before.Add(time.Second)) || l.Remaining() <= 0 || l.Remaining() > time.Second {
		t.Fatalf("Lease ValidUntil()=%v Remaining()=%v", l.ValidUntil(), l.Remaining())
	}
}
