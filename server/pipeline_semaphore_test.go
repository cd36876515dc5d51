package server_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

func semaphoreCall(t *testing.T, id uint64, call *fencedv1.SemaphoreCall) *fencedv1.PipelineCall {
	return &fencedv1.PipelineCall{Id: id, Call: &fencedv1.PipelineCall_Semaphore{Semaphore: mustMarshal(t, call)}}
}

func semAcquire(req *fencedv1.SemaphoreAcquireRequest) *fencedv1.SemaphoreCall {
	return &fencedv1.SemaphoreCall{Call: &fencedv1.SemaphoreCall_Acquire{Acquire: req}}
}

func semRelease(req *fencedv1.SemaphoreReleaseRequest) *fencedv1.SemaphoreCall {
	return &fencedv1.SemaphoreCall{Call: &fencedv1.SemaphoreCall_Release{Release: req}}
}

func semaphoreResult(t *testing.T, r *fencedv1.PipelineResult) *fencedv1.SemaphoreResult {
	t.Helper()
	return serializedResult[fencedv1.SemaphoreResult](t, r, r.GetSemaphore())
}

// Pipelined semaphore calls do what their unary calls do: two sessions
// take the 2 permits; a third session's waiting acquire, sent before any
// release, is granted when a holder releases, with a token above the
// released permit's; a release with another session's secret is refused
// and changes nothing; a call that is not a SemaphoreCall, or has no call,
// is refused as invalid; an acquire above the capacity fails with the
// unary call's code and message.
func TestPipeline_SemaphoreCalls(t *testing.T) {
	a := newAPI(t)
	sems := fencedv1connect.NewSemaphoreServiceClient(&http.Client{Transport: a.counter}, "http://"+a.addr)
	ctx := context.Background()
	s1, s2, s3 := a.session(t, 30000), a.session(t, 30000), a.session(t, 30000)
	acq := func(s, seq uint64, waitMs int64) *fencedv1.SemaphoreAcquireRequest {
		return &fencedv1.SemaphoreAcquireRequest{Name: "pool", Capacity: 2, Permits: 1, Session: s, Secret: secretOf(s), Seq: seq, WaitMs: waitMs}
	}
	p := a.pipeline(t)
	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{
		semaphoreCall(t, 1, semAcquire(acq(s1, 1, 0))),
		semaphoreCall(t, 2, semAcquire(acq(s2, 1, 0))),
	}})
	got := p.results(2)
	first := semaphoreResult(t, got[1]).GetAcquire()
	if !first.GetGranted() || !semaphoreResult(t, got[2]).GetAcquire().GetGranted() {
		t.Fatalf("two acquires of a semaphore of 2: %v, %v; want both granted", got[1], got[2])
	}
	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{
		semaphoreCall(t, 3, semAcquire(acq(s3, 1, 20000))),
	}})
	var before *connect.Response[fencedv1.SemaphoreDescribeResponse]
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var err error
		if before, err = sems.Describe(ctx, connect.NewRequest(&fencedv1.SemaphoreDescribeRequest{Name: "pool"})); err != nil {
			t.Fatal(err)
		}
		if before.Msg.WaiterCount == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10s the third session's acquire is not waiting: %v", before.Msg)
		}
	}
	// s2 releases s1's permits with its own secret: s1's are not its own.
	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{
		semaphoreCall(t, 4, semRelease(&fencedv1.SemaphoreReleaseRequest{Name: "pool", Session: s1, Seq: 2, Secret: secretOf(s2)})),
	}})
	if r := p.results(1)[4]; r.GetError() == nil {
		t.Fatalf("a release of s1's permit with s2's secret: %v, want refused", r)
	}
	after, err := sems.Describe(ctx, connect.NewRequest(&fencedv1.SemaphoreDescribeRequest{Name: "pool"}))
	if err != nil || !proto.Equal(before.Msg, after.Msg) {
		t.Fatalf("a refused release changed the semaphore:\nbefore %v\nafter  %v (%v)", before.Msg, after.Msg, err)
	}
	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{
		semaphoreCall(t, 5, semRelease(&fencedv1.SemaphoreReleaseRequest{Name: "pool", Session: s1, Seq: 2, Secret: secretOf(s1)})),
	}})
	got = p.results(2)
	if r := semaphoreResult(t, got[5]).GetRelease(); r.GetResult() != fencedv1.ReleaseResult_RELEASE_RESULT_RELEASED {
		t.Fatalf("s1's release: %v, want RELEASED", r)
	}
	waited := semaphoreResult(t, got[3]).GetAcquire()
	if !waited.GetGranted() || len(waited.GetPermits()) != 1 || waited.GetPermits()[0].GetGrant().GetToken() <= first.GetPermits()[0].GetGrant().GetToken() {
		t.Fatalf("the waiting acquire after s1's release: %v; want granted with a token above s1's %v", waited, first)
	}

	bad := map[uint64]*fencedv1.PipelineCall{
		6: {Id: 6, Call: &fencedv1.PipelineCall_Semaphore{Semaphore: []byte{0xff, 0xff, 0xff}}},
		7: semaphoreCall(t, 7, &fencedv1.SemaphoreCall{}),
	}
	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{bad[6], bad[7]}})
	got = p.results(2)
	for id := range bad {
		if e := got[id].GetError(); e == nil || connect.Code(e.Code) != connect.CodeInvalidArgument {
			t.Errorf("call %d: %v, want InvalidArgument", id, got[id])
		}
	}
	over := acq(a.session(t, 30000), 1, 0)
	over.Permits = 3
	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{semaphoreCall(t, 8, semAcquire(over))}})
	r := p.results(1)[8]
	_, unaryErr := sems.Acquire(ctx, connect.NewRequest(over))
	want := asConnectError(unaryErr)
	if e := r.GetError(); want == nil || e == nil || connect.Code(e.Code) != want.Code() || e.Message != want.Message() {
		t.Fatalf("3 permits of a semaphore of 2 through the pipeline: %v; its unary call: %v", r, unaryErr)
	}
}

// Pipelined semaphore calls are authorized as their unary calls: a reader
// (read, not acquire) cannot take a permit; the app (acquire) can.
func TestPipeline_SemaphoreCallsAuthorized(t *testing.T) {
	srv, _, _ := startAuth(t)
	pipeOf := func(token string) *pipe {
		stream := asIdentity(srv.Addr(), token).locks.Pipeline(context.Background())
		t.Cleanup(func() { stream.CloseRequest(); stream.CloseResponse() })
		return &pipe{t: t, stream: stream}
	}
	for _, who := range []struct {
		token string
		ok    bool
	}{{readerToken, false}, {appToken, true}} {
		sess, secret := asIdentity(srv.Addr(), appToken).session(t)
		req := semAcquire(&fencedv1.SemaphoreAcquireRequest{Name: "orders/pool", Capacity: 2, Session: sess, Secret: secret, Seq: 1})
		p := pipeOf(who.token)
		p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{semaphoreCall(t, 1, req)}})
		r := p.results(1)[1]
		if who.ok {
			if !semaphoreResult(t, r).GetAcquire().GetGranted() {
				t.Fatalf("app acquires through the pipeline: %v, want granted", r)
			}
			continue
		}
		if e := r.GetError(); e == nil || connect.Code(e.Code) != connect.CodePermissionDenied {
			t.Fatalf("reader acquires through the pipeline: %v, want PermissionDenied", r)
		}
	}
}
