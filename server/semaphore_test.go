package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/internal/wire"
	"github.com/fenced-dev/fenced/internal/wire/wireconnect"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

func semaphoreAPI(hc *http.Client, addr string) fencedv1connect.SemaphoreServiceClient {
	return fencedv1connect.NewSemaphoreServiceClient(hc, "http://"+addr)
}

func h2c() *http.Client {
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: tr}
}

// A waiting semaphore acquire is answered by the push of its permits: one
// request, granted when the holder releases; the waiting call of a lock
// of the same name and session is not woken by it.
func TestSemaphore_WaitPushedAndApartFromLocks(t *testing.T) {
	a := newAPI(t)
	sem := semaphoreAPI(h2c(), a.addr)
	ctx := context.Background()
	s1, s2 := a.session(t, 30000), a.session(t, 30000)
	first, err := sem.Acquire(ctx, connect.NewRequest(&fencedv1.SemaphoreAcquireRequest{Name: "orders", Capacity: 1, Session: s1, Secret: secretOf(s1), Seq: 1}))
	if err != nil || !first.Msg.Granted {
		t.Fatalf("first acquire: %v %v", first, err)
	}
	// s2 holds the lock "orders" and waits for a permit of the semaphore
	// "orders"; s1 waits for the lock.
	if r, err := a.acquire(t, "orders", s2, 1, 0); err != nil || !r.Granted {
		t.Fatalf("lock orders: %v %v", r, err)
	}
	lockDone := make(chan error, 1)
	go func() {
		r, err := a.acquire(t, "orders", s1, 2, 20000)
		if err == nil && r.Granted {
			err = errors.New("granted")
		}
		lockDone <- err
	}()
	semDone := make(chan *fencedv1.SemaphoreAcquireResponse, 1)
	go func() {
		r, err := sem.Acquire(ctx, connect.NewRequest(&fencedv1.SemaphoreAcquireRequest{Name: "orders", Capacity: 1, Session: s2, Secret: secretOf(s2), Seq: 2, WaitMs: 20000}))
		if err != nil {
			t.Errorf("waiting acquire: %v", err)
		}
		semDone <- r.Msg
	}()
	waitFor(t, "the semaphore waiter queued", func() bool {
		d, err := sem.Describe(ctx, connect.NewRequest(&fencedv1.SemaphoreDescribeRequest{Name: "orders"}))
		return err == nil && d.Msg.WaiterCount == 1
	})
	if _, err := sem.Release(ctx, connect.NewRequest(&fencedv1.SemaphoreReleaseRequest{Name: "orders", Session: s1, Secret: secretOf(s1), Seq: 3})); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-semDone:
		if !r.Granted || len(r.Permits) != 1 || r.Permits[0].Grant.Kind != "permit" || r.Permits[0].Grant.Scope != "orders/0" || r.Permits[0].Grant.Token <= first.Msg.Permits[0].Grant.Token {
			t.Fatalf("pushed permits %v", r)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the waiting acquire was not answered after the release")
	}
	select {
	case err := <-lockDone:
		t.Fatalf("the lock waiter was woken by the semaphore: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	v, err := sem.Verify(ctx, connect.NewRequest(&fencedv1.SemaphoreVerifyRequest{Name: "orders", Slot: 0, Token: first.Msg.Permits[0].Grant.Token}))
	if err != nil || v.Msg.Current || v.Msg.Holder.GetGrant().GetSession() != s2 {
		t.Fatalf("Verify of the released permit: %v %v, want not current, held by %d", v, err, s2)
	}
}

// Bad input to the API is refused with a clear error and changes nothing.
func TestSemaphore_APIBadInputChangesNothing(t *testing.T) {
	a := newAPI(t)
	sem := semaphoreAPI(h2c(), a.addr)
	ctx := context.Background()
	s := a.session(t, 30000)
	if _, err := sem.Acquire(ctx, connect.NewRequest(&fencedv1.SemaphoreAcquireRequest{Name: "pool", Capacity: 2, Permits: 1, Session: s, Secret: secretOf(s), Seq: 1})); err != nil {
		t.Fatal(err)
	}
	state := func() string {
		d, err := sem.Describe(ctx, connect.NewRequest(&fencedv1.SemaphoreDescribeRequest{Name: "pool"}))
		if err != nil {
			t.Fatal(err)
		}
		st, err := a.locks.Status(ctx, connect.NewRequest(&fencedv1.StatusRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%v; last token %d; %d sessions", d.Msg, st.Msg.LastToken, len(st.Msg.Sessions))
	}
	before := state()
	for _, tc := range []struct {
		what string
		req  *fencedv1.SemaphoreAcquireRequest
		code connect.Code
		is   error
		say  string
	}{
		{"capacity 0", &fencedv1.SemaphoreAcquireRequest{Name: "pool", Capacity: 0, Session: s, Secret: secretOf(s), Seq: 2}, connect.CodeInvalidArgument, fence.ErrInvalidArgument, "capacity is 0"},
		{"capacity above 1000000", &fencedv1.SemaphoreAcquireRequest{Name: "pool", Capacity: 1000001, Session: s, Secret: secretOf(s), Seq: 2}, connect.CodeInvalidArgument, fence.ErrInvalidArgument, "1 to 1000000"},
		{"permits above capacity", &fencedv1.SemaphoreAcquireRequest{Name: "pool", Capacity: 2, Permits: 3, Session: s, Secret: secretOf(s), Seq: 2}, connect.CodeInvalidArgument, fence.ErrInvalidArgument, "3 permits asked"},
		{"capacity mismatch", &fencedv1.SemaphoreAcquireRequest{Name: "pool", Capacity: 3, Session: 0, TtlMs: 5000}, connect.CodeFailedPrecondition, fence.ErrCapacityMismatch, "capacity 2"},
		{"wrong secret", &fencedv1.SemaphoreAcquireRequest{Name: "pool", Capacity: 2, Session: s, Secret: strings.Repeat("0", 32), Seq: 2}, connect.CodePermissionDenied, fence.ErrNotOwner, ""},
		{"bad name", &fencedv1.SemaphoreAcquireRequest{Name: "", Capacity: 2, Session: s, Secret: secretOf(s), Seq: 2}, connect.CodeInvalidArgument, fence.ErrInvalidArgument, ""},
	} {
		_, err := sem.Acquire(ctx, connect.NewRequest(tc.req))
		if connect.CodeOf(err) != tc.code || !errors.Is(wireconnect.Decode(err, wire.Call{}), tc.is) || !strings.Contains(err.Error(), tc.say) {
			t.Errorf("%s: %v, want %v (%v) saying %q", tc.what, err, tc.code, tc.is, tc.say)
		}
		if after := state(); after != before {
			t.Errorf("%s changed the state:\n%s\n%s", tc.what, before, after)
		}
	}
	if _, err := sem.Release(ctx, connect.NewRequest(&fencedv1.SemaphoreReleaseRequest{Name: "pool", Session: s, Secret: strings.Repeat("0", 32), Seq: 3})); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("release with a wrong secret: %v, want PermissionDenied", err)
	}
	if after := state(); after != before {
		t.Errorf("the refused release changed the state")
	}
	// The semaphore's metrics are served.
	resp, err := http.Get("http://" + a.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, m := range []string{"fenced_semaphore_permits_held 1", "fenced_semaphore_waiters 0", "fenced_semaphore_permits_granted_total 1"} {
		if !strings.Contains(string(body), m) {
			t.Errorf("/metrics lacks %q", m)
		}
	}
}

// The semaphore's calls need acquire (Acquire, Release) and read (Verify,
// Describe) on the semaphore's name, as the lock's do.
func TestSemaphore_Authorization(t *testing.T) {
	srv, _, _ := startAuth(t)
	ctx := context.Background()
	app, reader := asIdentity(srv.Addr(), appToken), asIdentity(srv.Addr(), readerToken)
	s, secret := app.session(t)
	appSem, readerSem := semaphoreAPI(app.hc, srv.Addr()), semaphoreAPI(reader.hc, srv.Addr())
	if _, err := appSem.Acquire(ctx, connect.NewRequest(&fencedv1.SemaphoreAcquireRequest{Name: "orders/pool", Capacity: 2, Session: s, Secret: secret, Seq: 1})); err != nil {
		t.Fatalf("app acquires orders/pool: %v", err)
	}
	_, err := appSem.Acquire(ctx, connect.NewRequest(&fencedv1.SemaphoreAcquireRequest{Name: "billing/pool", Capacity: 2, Session: s, Secret: secret, Seq: 2}))
	denied(t, "app acquires billing/pool", err, "acquire", "billing/pool")
	_, err = readerSem.Acquire(ctx, connect.NewRequest(&fencedv1.SemaphoreAcquireRequest{Name: "orders/pool", Capacity: 2, TtlMs: 5000}))
	denied(t, "reader acquires orders/pool", err, "acquire")
	_, err = readerSem.Release(ctx, connect.NewRequest(&fencedv1.SemaphoreReleaseRequest{Name: "orders/pool", Session: s, Secret: secret, Seq: 3}))
	denied(t, "reader releases orders/pool", err, "acquire")
	if d, err := readerSem.Describe(ctx, connect.NewRequest(&fencedv1.SemaphoreDescribeRequest{Name: "orders/pool"})); err != nil || d.Msg.Held != 1 {
		t.Fatalf("reader describes orders/pool: %v %v", d, err)
	}
	_, err = readerSem.Describe(ctx, connect.NewRequest(&fencedv1.SemaphoreDescribeRequest{Name: "billing/pool"}))
	denied(t, "reader describes billing/pool", err, "read")
	_, err = readerSem.Verify(ctx, connect.NewRequest(&fencedv1.SemaphoreVerifyRequest{Name: "billing/pool", Token: 1}))
	denied(t, "reader verifies billing/pool", err, "read")
}

// Per-grant permits (session 0): the answer carries the new session's
// secret, the permits live in a session of their own TTL, and the secret
// releases them.
func TestSemaphore_PerGrantPermits(t *testing.T) {
	a := newAPI(t)
	sem := semaphoreAPI(h2c(), a.addr)
	ctx := context.Background()
	r, err := sem.Acquire(ctx, connect.NewRequest(&fencedv1.SemaphoreAcquireRequest{Name: "pool", Capacity: 4, Permits: 2, TtlMs: 5000, RequestId: "job-1"}))
	if err != nil || !r.Msg.Granted || len(r.Msg.Permits) != 2 || len(r.Msg.Secret) != 32 {
		t.Fatalf("per-grant acquire: %v %v", r, err)
	}
	g := r.Msg.Permits[1].Grant
	if g.TtlMs != 5000 || g.Session == 0 || g.Scope != "pool/1" {
		t.Fatalf("permit %v, want ttl 5000 on its own session, scope pool/1", g)
	}
	if _, err := sem.Release(ctx, connect.NewRequest(&fencedv1.SemaphoreReleaseRequest{Name: "pool", Session: g.Session, Secret: r.Msg.Secret})); err != nil {
		t.Fatalf("release with the secret: %v", err)
	}
	d, err := sem.Describe(ctx, connect.NewRequest(&fencedv1.SemaphoreDescribeRequest{Name: "pool"}))
	if err != nil || d.Msg.Capacity != 0 {
		t.Fatalf("after the release: %v %v, want not in use", d, err)
	}
}
