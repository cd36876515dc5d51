package server_test

import (
	"context"
	"testing"

	"connectrpc.com/connect"

	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// TestAuth_LatchesAndLimiters: latches need acquire to create and count
// down and read to join and wait, on a prefix of their name; a limiter
// needs admin to configure, acquire to take and read to describe.
func TestAuth_LatchesAndLimiters(t *testing.T) {
	srv, _, _ := startAuth(t)
	ctx := context.Background()
	latches := func(token string) fencedv1connect.LatchServiceClient {
		a := asIdentity(srv.Addr(), token)
		return fencedv1connect.NewLatchServiceClient(a.hc, a.base)
	}
	limiters := func(token string) fencedv1connect.LimiterServiceClient {
		a := asIdentity(srv.Addr(), token)
		return fencedv1connect.NewLimiterServiceClient(a.hc, a.base)
	}
	app, reader := latches(appToken), latches(readerToken)
	if _, err := app.Create(ctx, connect.NewRequest(&fencedv1.LatchCreateRequest{Name: "orders/batch", Count: 2})); err != nil {
		t.Fatalf("app creates orders/batch: %v", err)
	}
	_, err := app.Create(ctx, connect.NewRequest(&fencedv1.LatchCreateRequest{Name: "billing/batch", Count: 2}))
	denied(t, "app creates billing/batch", err, `"acquire"`, `"billing/batch"`)
	_, err = reader.CountDown(ctx, connect.NewRequest(&fencedv1.LatchCountDownRequest{Name: "orders/batch", Generation: 1}))
	denied(t, "reader counts orders/batch down", err, `"acquire"`)
	_, err = reader.Create(ctx, connect.NewRequest(&fencedv1.LatchCreateRequest{Name: "orders/batch", Count: 9}))
	denied(t, "reader resets orders/batch", err, `"acquire"`)
	j, err := reader.Join(ctx, connect.NewRequest(&fencedv1.LatchJoinRequest{Name: "orders/batch"}))
	if err != nil || j.Msg.Latch.Count != 2 {
		t.Fatalf("reader joins orders/batch: %v, %v (want count 2: the denied calls changed nothing)", j, err)
	}
	if _, err := reader.Wait(ctx, connect.NewRequest(&fencedv1.LatchWaitRequest{Name: "orders/batch", Generation: 1})); err != nil {
		t.Fatalf("reader waits on orders/batch: %v", err)
	}
	_, err = latches(appToken).Join(ctx, connect.NewRequest(&fencedv1.LatchJoinRequest{Name: "billing/batch"}))
	denied(t, "app joins billing/batch", err, `"read"`)

	spec := &fencedv1.LimiterSpec{Algorithm: "fixed_window", Limit: 5, WindowMs: 60000}
	_, err = limiters(appToken).Config(ctx, connect.NewRequest(&fencedv1.LimiterConfigRequest{Name: "orders/api", Spec: spec}))
	denied(t, "app configures orders/api", err, `"admin"`)
	if _, err := limiters(adminToken).Config(ctx, connect.NewRequest(&fencedv1.LimiterConfigRequest{Name: "orders/api", Spec: spec})); err != nil {
		t.Fatalf("admin configures orders/api: %v", err)
	}
	if r, err := limiters(appToken).Take(ctx, connect.NewRequest(&fencedv1.LimiterTakeRequest{Name: "orders/api", Permits: 1})); err != nil || !r.Msg.Granted {
		t.Fatalf("app takes from orders/api: %v, %v", r, err)
	}
	_, err = limiters(readerToken).Take(ctx, connect.NewRequest(&fencedv1.LimiterTakeRequest{Name: "orders/api", Permits: 1}))
	denied(t, "reader takes from orders/api", err, `"acquire"`)
	d, err := limiters(readerToken).Describe(ctx, connect.NewRequest(&fencedv1.LimiterDescribeRequest{Name: "orders/api"}))
	if err != nil || d.Msg.Available != 4 {
		t.Fatalf("reader describes orders/api: %v, %v (want 4 available)", d, err)
	}
}
