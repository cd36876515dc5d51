package server_test

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

func limiterTake(id uint64, req *fencedv1.LimiterTakeRequest) *fencedv1.PipelineCall {
	return &fencedv1.PipelineCall{Id: id, Call: &fencedv1.PipelineCall_LimiterTake{LimiterTake: req}}
}

// Pipelined limiter takes do what their unary calls do, and the
// Pipeline names them in its first response: on a window of 2, two takes
// are granted and the third is refused with a retry-after; a take of 0
// permits, one of a limiter never configured and one with a bad name fail
// with the unary call's code and message; none of the refused or failed
// takes used a permit.
func TestPipeline_LimiterTakes(t *testing.T) {
	a := newAPI(t)
	hc := &http.Client{Transport: a.counter}
	limiters := fencedv1connect.NewLimiterServiceClient(hc, "http://"+a.addr)
	ctx := context.Background()
	spec := &fencedv1.LimiterSpec{Algorithm: "fixed_window", Limit: 2, WindowMs: 60000}
	if _, err := limiters.Config(ctx, connect.NewRequest(&fencedv1.LimiterConfigRequest{Name: "api", Spec: spec})); err != nil {
		t.Fatal(err)
	}
	stream := a.locks.Pipeline(ctx)
	t.Cleanup(func() { stream.CloseRequest(); stream.CloseResponse() })
	if err := stream.Send(&fencedv1.PipelineRequest{}); err != nil {
		t.Fatal(err)
	}
	first, err := stream.Receive()
	if err != nil || !slices.Contains(first.GetCalls(), fencedv1.PipelineCallKind_PIPELINE_CALL_KIND_LIMITER) {
		t.Fatalf("first response %v (%v): want it to name PIPELINE_CALL_KIND_LIMITER", first, err)
	}
	p := &pipe{t: t, stream: stream}
	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{
		limiterTake(1, &fencedv1.LimiterTakeRequest{Name: "api", Permits: 1}),
	}})
	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{
		limiterTake(2, &fencedv1.LimiterTakeRequest{Name: "api", Permits: 1}),
	}})
	got := p.results(2)
	for _, id := range []uint64{1, 2} {
		if r := got[id].GetLimiterTake(); !r.GetGranted() {
			t.Fatalf("take %d of a window of 2: %v, want granted", id, got[id])
		}
	}
	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{
		limiterTake(3, &fencedv1.LimiterTakeRequest{Name: "api", Permits: 1}),
	}})
	if r := p.results(1)[3].GetLimiterTake(); r == nil || r.Granted || r.RetryAfterMs <= 0 {
		t.Fatalf("a third take of a window of 2: %v, want refused with a retry-after", r)
	}

	bad := map[uint64]*fencedv1.LimiterTakeRequest{
		4: {Name: "api", Permits: 0},
		5: {Name: "never-configured", Permits: 1},
		6: {Name: "bad name", Permits: 1},
		7: {Name: "api", Permits: 1, MaxWaitMs: -1},
	}
	var calls []*fencedv1.PipelineCall
	for id, req := range bad {
		calls = append(calls, limiterTake(id, req))
	}
	p.send(&fencedv1.PipelineRequest{Calls: calls})
	got = p.results(len(bad))
	for id, req := range bad {
		_, unaryErr := limiters.Take(ctx, connect.NewRequest(req))
		want := asConnectError(unaryErr)
		e := got[id].GetError()
		if want == nil || e == nil || connect.Code(e.Code) != want.Code() || e.Message != want.Message() {
			t.Errorf("take %v through the pipeline: %v; its unary call: %v", req, got[id], unaryErr)
		}
	}
	d, err := limiters.Describe(ctx, connect.NewRequest(&fencedv1.LimiterDescribeRequest{Name: "api"}))
	if err != nil || d.Msg.Available != 0 {
		t.Fatalf("describe after 2 granted takes: %v, %v; want 0 available", d, err)
	}
}

// asConnectError is err as a *connect.Error, or nil.
func asConnectError(err error) *connect.Error {
	ce, _ := err.(*connect.Error)
	return ce
}

// A pipelined limiter take is authorized as its unary call: a reader
// (read, not acquire) is refused and uses no permit; the app (acquire)
// takes one.
func TestPipeline_LimiterTakeAuthorized(t *testing.T) {
	srv, _, _ := startAuth(t)
	ctx := context.Background()
	admin := asIdentity(srv.Addr(), adminToken)
	limiters := fencedv1connect.NewLimiterServiceClient(admin.hc, admin.base)
	spec := &fencedv1.LimiterSpec{Algorithm: "fixed_window", Limit: 5, WindowMs: 60000}
	if _, err := limiters.Config(ctx, connect.NewRequest(&fencedv1.LimiterConfigRequest{Name: "orders/api", Spec: spec})); err != nil {
		t.Fatal(err)
	}
	pipeOf := func(token string) *pipe {
		stream := asIdentity(srv.Addr(), token).locks.Pipeline(ctx)
		t.Cleanup(func() { stream.CloseRequest(); stream.CloseResponse() })
		return &pipe{t: t, stream: stream}
	}
	take := &fencedv1.LimiterTakeRequest{Name: "orders/api", Permits: 1}
	reader := pipeOf(readerToken)
	reader.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{limiterTake(1, take)}})
	if e := reader.results(1)[1].GetError(); e == nil || connect.Code(e.Code) != connect.CodePermissionDenied {
		t.Fatalf("reader takes through the pipeline: %v, want PermissionDenied", e)
	}
	app := pipeOf(appToken)
	app.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{limiterTake(1, proto.Clone(take).(*fencedv1.LimiterTakeRequest))}})
	if r := app.results(1)[1]; !r.GetLimiterTake().GetGranted() {
		t.Fatalf("app takes through the pipeline: %v, want granted", r)
	}
	d, err := limiters.Describe(ctx, connect.NewRequest(&fencedv1.LimiterDescribeRequest{Name: "orders/api"}))
	if err != nil || d.Msg.Available != 4 {
		t.Fatalf("describe: %v, %v; want 4 available (the reader's refused take used none)", d, err)
	}
}
