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

func rwlockCall(t *testing.T, id uint64, call *fencedv1.RWLockCall) *fencedv1.PipelineCall {
	return &fencedv1.PipelineCall{Id: id, Call: &fencedv1.PipelineCall_Rwlock{Rwlock: mustMarshal(t, call)}}
}

func rwAcquire(req *fencedv1.RWAcquireRequest) *fencedv1.RWLockCall {
	return &fencedv1.RWLockCall{Call: &fencedv1.RWLockCall_Acquire{Acquire: req}}
}

func rwRelease(req *fencedv1.RWReleaseRequest) *fencedv1.RWLockCall {
	return &fencedv1.RWLockCall{Call: &fencedv1.RWLockCall_Release{Release: req}}
}

func rwlockResult(t *testing.T, r *fencedv1.PipelineResult) *fencedv1.RWLockResult {
	t.Helper()
	return serializedResult[fencedv1.RWLockResult](t, r, r.GetRwlock())
}

// Pipelined read/write lock calls do what their unary calls do: two
// readers share the lock; a writer's waiting acquire, sent while they
// hold it, is granted once both released, with a token above theirs; a
// release with another session's secret is refused and changes nothing;
// a call that is not an RWLockCall, or has no call, is refused as invalid.
func TestPipeline_RWLockCalls(t *testing.T) {
	a := newAPI(t)
	rw := fencedv1connect.NewRWLockServiceClient(&http.Client{Transport: a.counter}, "http://"+a.addr)
	ctx := context.Background()
	r1, r2, w := a.session(t, 30000), a.session(t, 30000), a.session(t, 30000)
	acq := func(s uint64, mode fencedv1.RWLockMode, waitMs int64) *fencedv1.RWAcquireRequest {
		return &fencedv1.RWAcquireRequest{Name: "doc", Mode: mode, Session: s, Secret: secretOf(s), Seq: 1, WaitMs: waitMs}
	}
	read, write := fencedv1.RWLockMode_RW_LOCK_MODE_READ, fencedv1.RWLockMode_RW_LOCK_MODE_WRITE
	p := a.pipeline(t)
	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{
		rwlockCall(t, 1, rwAcquire(acq(r1, read, 0))),
		rwlockCall(t, 2, rwAcquire(acq(r2, read, 0))),
	}})
	got := p.results(2)
	var top uint64
	for _, id := range []uint64{1, 2} {
		r := rwlockResult(t, got[id]).GetAcquire()
		if !r.GetGranted() {
			t.Fatalf("reader %d: %v, want granted (readers share)", id, r)
		}
		top = max(top, r.GetGrant().GetToken())
	}
	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{rwlockCall(t, 3, rwAcquire(acq(w, write, 20000)))}})
	describe := func() *fencedv1.RWLockInfo {
		d, err := rw.Describe(ctx, connect.NewRequest(&fencedv1.RWDescribeRequest{Name: "doc"}))
		if err != nil {
			t.Fatal(err)
		}
		return d.Msg.Lock
	}
	var before *fencedv1.RWLockInfo
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if before = describe(); before.WaiterCount == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10s the writer's acquire is not waiting: %v", before)
		}
	}
	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{
		rwlockCall(t, 4, rwRelease(&fencedv1.RWReleaseRequest{Name: "doc", Session: r1, Seq: 2, Secret: secretOf(w)})),
	}})
	if r := p.results(1)[4]; r.GetError() == nil {
		t.Fatalf("a release of r1's read grant with w's secret: %v, want refused", r)
	}
	if after := describe(); !proto.Equal(before, after) {
		t.Fatalf("a refused release changed the lock:\nbefore %v\nafter  %v", before, after)
	}
	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{
		rwlockCall(t, 5, rwRelease(&fencedv1.RWReleaseRequest{Name: "doc", Session: r1, Seq: 2, Secret: secretOf(r1)})),
		rwlockCall(t, 6, rwRelease(&fencedv1.RWReleaseRequest{Name: "doc", Session: r2, Seq: 2, Secret: secretOf(r2)})),
	}})
	got = p.results(3)
	for _, id := range []uint64{5, 6} {
		if r := rwlockResult(t, got[id]).GetRelease(); r.GetResult() != fencedv1.ReleaseResult_RELEASE_RESULT_RELEASED {
			t.Fatalf("release %d: %v, want RELEASED", id, r)
		}
	}
	if r := rwlockResult(t, got[3]).GetAcquire(); !r.GetGranted() || r.GetGrant().GetToken() <= top {
		t.Fatalf("the waiting writer after both readers released: %v; want granted with a token above %d", r, top)
	}
	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{
		{Id: 7, Call: &fencedv1.PipelineCall_Rwlock{Rwlock: []byte{0xff, 0xff, 0xff}}},
		rwlockCall(t, 8, &fencedv1.RWLockCall{}),
	}})
	got = p.results(2)
	for _, id := range []uint64{7, 8} {
		if e := got[id].GetError(); e == nil || connect.Code(e.Code) != connect.CodeInvalidArgument {
			t.Errorf("call %d: %v, want InvalidArgument", id, got[id])
		}
	}
}

// Pipelined read/write lock calls are authorized as their unary calls: a
// reader identity (read, not acquire) cannot take even a read grant; the
// app (acquire) can.
func TestPipeline_RWLockCallsAuthorized(t *testing.T) {
	srv, _, _ := startAuth(t)
	for _, who := range []struct {
		token string
		ok    bool
	}{{readerToken, false}, {appToken, true}} {
		sess, secret := asIdentity(srv.Addr(), appToken).session(t)
		stream := asIdentity(srv.Addr(), who.token).locks.Pipeline(context.Background())
		t.Cleanup(func() { stream.CloseRequest(); stream.CloseResponse() })
		p := &pipe{t: t, stream: stream}
		req := rwAcquire(&fencedv1.RWAcquireRequest{Name: "orders/doc", Mode: fencedv1.RWLockMode_RW_LOCK_MODE_READ, Session: sess, Secret: secret, Seq: 1})
		p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{rwlockCall(t, 1, req)}})
		r := p.results(1)[1]
		if who.ok {
			if !rwlockResult(t, r).GetAcquire().GetGranted() {
				t.Fatalf("app read-locks through the pipeline: %v, want granted", r)
			}
			continue
		}
		if e := r.GetError(); e == nil || connect.Code(e.Code) != connect.CodePermissionDenied {
			t.Fatalf("reader read-locks through the pipeline: %v, want PermissionDenied", r)
		}
	}
}
