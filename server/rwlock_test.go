package server_test

import (
	"context"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/fenced-dev/fenced/internal/testserver"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

func rwAPI(a *authAPI) fencedv1connect.RWLockServiceClient {
	return fencedv1connect.NewRWLockServiceClient(a.hc, a.base)
}

// The read/write lock calls are authorized like the lock's: acquire and
// release need acquire on the name, verify and describe need read.
func TestRWLock_Authz(t *testing.T) {
	srv, _, _ := startAuth(t)
	app, reader := asIdentity(srv.Addr(), appToken), asIdentity(srv.Addr(), readerToken)
	ctx := context.Background()
	sess, secret := app.session(t)
	rw := rwAPI(app)
	r, err := rw.Acquire(ctx, connect.NewRequest(&fencedv1.RWAcquireRequest{Name: "orders/1", Mode: fencedv1.RWLockMode_RW_LOCK_MODE_READ, Session: sess, Secret: secret}))
	if err != nil || !r.Msg.Granted || r.Msg.Grant.GetKind() != "read" || r.Msg.Grant.GetScope() != "orders/1" {
		t.Fatalf("app reads orders/1: %v %v, want a read grant of scope orders/1", r, err)
	}
	_, err = rw.Acquire(ctx, connect.NewRequest(&fencedv1.RWAcquireRequest{Name: "billing/x", Mode: fencedv1.RWLockMode_RW_LOCK_MODE_WRITE, Session: sess, Secret: secret}))
	denied(t, "app writes billing/x", err, `"acquire"`, `"billing/x"`)
	_, err = rw.Release(ctx, connect.NewRequest(&fencedv1.RWReleaseRequest{Name: "billing/x", Session: sess, Secret: secret}))
	denied(t, "app releases billing/x", err, `"acquire"`)
	if _, err := rwAPI(reader).Describe(ctx, connect.NewRequest(&fencedv1.RWDescribeRequest{Name: "orders/1"})); err != nil {
		t.Fatalf("reader describes orders/1: %v", err)
	}
	_, err = rwAPI(reader).Verify(ctx, connect.NewRequest(&fencedv1.RWVerifyRequest{Name: "billing/x", Token: 1}))
	denied(t, "reader verifies billing/x", err, `"read"`)
	_, err = rwAPI(reader).Acquire(ctx, connect.NewRequest(&fencedv1.RWAcquireRequest{Name: "orders/1", Mode: fencedv1.RWLockMode_RW_LOCK_MODE_READ, TtlMs: 5000}))
	denied(t, "reader takes a read grant", err, `"acquire"`)
	v, err := rwAPI(reader).Verify(ctx, connect.NewRequest(&fencedv1.RWVerifyRequest{Name: "orders/1", Token: r.Msg.Grant.GetToken()}))
	if err != nil || !v.Msg.Current {
		t.Fatalf("verify of the live read grant: %v %v, want current", v, err)
	}
}

// Bad requests to the API are refused with InvalidArgument (an unknown
// mode, a malformed name, no session and no TTL) or as not the owner (a
// wrong secret), and change nothing.
func TestRWLock_APIBadInputChangesNothing(t *testing.T) {
	srv := testserver.Start(t)
	a := asIdentity(srv.Addr(), "")
	rw := rwAPI(a)
	ctx := context.Background()
	sess, secret := a.session(t)
	if _, err := rw.Acquire(ctx, connect.NewRequest(&fencedv1.RWAcquireRequest{Name: "db", Mode: fencedv1.RWLockMode_RW_LOCK_MODE_WRITE, Session: sess, Secret: secret, Seq: 1})); err != nil {
		t.Fatal(err)
	}
	describe := func() *fencedv1.RWDescribeResponse {
		r, err := rw.Describe(ctx, connect.NewRequest(&fencedv1.RWDescribeRequest{Name: "db"}))
		if err != nil {
			t.Fatal(err)
		}
		return r.Msg
	}
	before := describe()
	other := "00112233445566778899aabbccddeeff"
	for _, tt := range []struct {
		name string
		req  *fencedv1.RWAcquireRequest
		code connect.Code
	}{
		{"no mode", &fencedv1.RWAcquireRequest{Name: "db", Session: sess, Secret: secret, Seq: 2}, connect.CodeInvalidArgument},
		{"unknown mode", &fencedv1.RWAcquireRequest{Name: "db", Mode: 3, Session: sess, Secret: secret, Seq: 2}, connect.CodeInvalidArgument},
		{"empty name", &fencedv1.RWAcquireRequest{Mode: fencedv1.RWLockMode_RW_LOCK_MODE_READ, Session: sess, Secret: secret, Seq: 2}, connect.CodeInvalidArgument},
		{"control character", &fencedv1.RWAcquireRequest{Name: "d\x00b", Mode: fencedv1.RWLockMode_RW_LOCK_MODE_READ, Session: sess, Secret: secret, Seq: 2}, connect.CodeInvalidArgument},
		{"no session, no ttl", &fencedv1.RWAcquireRequest{Name: "db", Mode: fencedv1.RWLockMode_RW_LOCK_MODE_READ}, connect.CodeInvalidArgument},
		{"negative wait", &fencedv1.RWAcquireRequest{Name: "db", Mode: fencedv1.RWLockMode_RW_LOCK_MODE_READ, Session: sess, Secret: secret, Seq: 2, WaitMs: -1}, connect.CodeInvalidArgument},
		{"downgrade", &fencedv1.RWAcquireRequest{Name: "db", Mode: fencedv1.RWLockMode_RW_LOCK_MODE_READ, Session: sess, Secret: secret, Seq: 2}, connect.CodeInvalidArgument},
		{"wrong secret", &fencedv1.RWAcquireRequest{Name: "db", Mode: fencedv1.RWLockMode_RW_LOCK_MODE_READ, Session: sess, Secret: other, Seq: 2}, connect.CodePermissionDenied},
	} {
		_, err := rw.Acquire(ctx, connect.NewRequest(tt.req))
		if connect.CodeOf(err) != tt.code {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.code)
		}
	}
	if _, err := rw.Release(ctx, connect.NewRequest(&fencedv1.RWReleaseRequest{Name: "db", Session: sess, Secret: other, Seq: 3})); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("release with a wrong secret: %v, want PermissionDenied", err)
	}
	if after := describe(); !proto.Equal(after, before) {
		t.Fatalf("bad input changed the lock:\nbefore %v\nafter  %v", before, after)
	}
}

// A one-shot grant (session 0) has a session of its own TTL, created in
// the same command, whose secret comes back with the grant and releases it.
func TestRWLock_OneShotGrant(t *testing.T) {
	srv := testserver.Start(t)
	rw := rwAPI(asIdentity(srv.Addr(), ""))
	ctx := context.Background()
	r, err := rw.Acquire(ctx, connect.NewRequest(&fencedv1.RWAcquireRequest{Name: "one", Mode: fencedv1.RWLockMode_RW_LOCK_MODE_WRITE, TtlMs: 3000, RequestId: "req-1"}))
	if err != nil || !r.Msg.Granted || r.Msg.Secret == "" || r.Msg.Grant.GetTtlMs() != 3000 || r.Msg.Grant.GetKind() != "write" {
		t.Fatalf("one-shot write: %v %v, want a write grant of ttl 3000ms with its session's secret", r, err)
	}
	g := r.Msg.Grant
	if rel, err := rw.Release(ctx, connect.NewRequest(&fencedv1.RWReleaseRequest{Name: "one", Session: g.Session, Secret: r.Msg.Secret, Seq: 2})); err != nil || rel.Msg.Result != fencedv1.ReleaseResult_RELEASE_RESULT_RELEASED {
		t.Fatalf("release of the one-shot grant: %v %v, want released", rel, err)
	}
}
