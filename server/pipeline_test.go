package server_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/server"
)

// pipe is a Pipeline stream with a receive helper.
type pipe struct {
	t      *testing.T
	stream *connect.BidiStreamForClient[fencedv1.PipelineRequest, fencedv1.PipelineResponse]
}

func (a *api) pipeline(t *testing.T) *pipe {
	stream := a.locks.Pipeline(context.Background())
	t.Cleanup(func() { stream.CloseRequest(); stream.CloseResponse() })
	return &pipe{t: t, stream: stream}
}

func (p *pipe) send(req *fencedv1.PipelineRequest) {
	p.t.Helper()
	if err := p.stream.Send(req); err != nil {
		p.t.Fatalf("pipeline send: %v", err)
	}
}

// results receives until n results arrived and returns them by id.
func (p *pipe) results(n int) map[uint64]*fencedv1.PipelineResult {
	p.t.Helper()
	got := map[uint64]*fencedv1.PipelineResult{}
	for len(got) < n {
		resp, err := p.stream.Receive()
		if err != nil {
			p.t.Fatalf("pipeline receive after %d of %d results: %v", len(got), n, err)
		}
		for _, r := range resp.Results {
			got[r.Id] = r
		}
	}
	return got
}

func acquireCall(id uint64, name string, session, seq uint64, waitMs int64) *fencedv1.PipelineCall {
	return &fencedv1.PipelineCall{Id: id, Call: &fencedv1.PipelineCall_Acquire{Acquire: &fencedv1.AcquireRequest{Name: name, Session: session, Secret: secretOf(session), Seq: seq, WaitMs: waitMs}}}
}

// Calls sent together are answered each by id, with the results and
// errors their unary calls would give.
func TestPipeline_AnswersEachCallAsItsUnaryCall(t *testing.T) {
	a := newAPI(t)
	s1, s2 := a.session(t, 30000), a.session(t, 30000)
	p := a.pipeline(t)
	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{
		acquireCall(1, "a", s1, 1, 0),
		acquireCall(2, "b", s2, 1, 0),
		acquireCall(3, "", s1, 2, 0),      // invalid name
		acquireCall(4, "c", 987654, 1, 0), // unknown session
		{Id: 5},                           // no call at all
	}})
	got := p.results(5)
	if !got[1].GetAcquire().GetGranted() || !got[2].GetAcquire().GetGranted() {
		t.Fatalf("acquires of free locks: %v %v", got[1], got[2])
	}
	if got[2].GetAcquire().GetGrant().GetToken() == got[1].GetAcquire().GetGrant().GetToken() {
		t.Fatal("two grants share a token")
	}
	for id, code := range map[uint64]connect.Code{3: connect.CodeInvalidArgument, 4: connect.CodeNotFound, 5: connect.CodeInvalidArgument} {
		if e := got[id].GetError(); e == nil || connect.Code(e.Code) != code || e.Message == "" {
			t.Errorf("call %d: %v, want error %v with a message", id, got[id], code)
		}
	}

	// A retried (session, seq) returns the original grant, as unary does.
	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{acquireCall(6, "a", s1, 1, 0)}})
	if r := p.results(1)[6]; r.GetAcquire().GetGrant().GetToken() != got[1].GetAcquire().GetGrant().GetToken() {
		t.Fatalf("retried acquire: %v, want the original grant", r)
	}
	// Release through the pipeline.
	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{{Id: 7, Call: &fencedv1.PipelineCall_Release{Release: &fencedv1.ReleaseRequest{Name: "a", Session: s1, Secret: secretOf(s1), Seq: 3}}}}})
	if r := p.results(1)[7]; r.GetRelease().GetResult() != fencedv1.ReleaseResult_RELEASE_RESULT_RELEASED {
		t.Fatalf("release: %v", r)
	}
}

// A queued acquire the client cancels leaves the queue, as a unary call
// whose client went away does; a second call with an id in flight is
// refused.
func TestPipeline_CancelLeavesQueueAndIDsMustBeUnique(t *testing.T) {
	a := newAPI(t)
	holder, waiter := a.session(t, 30000), a.session(t, 30000)
	if r, err := a.acquire(t, "q", holder, 1, 0); err != nil || !r.Granted {
		t.Fatalf("first acquire: %v %v", r, err)
	}
	p := a.pipeline(t)
	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{acquireCall(1, "q", waiter, 1, 60000)}})
	waitFor(t, "the waiter to queue", func() bool { return len(a.describe(t, "q").Waiters) == 1 })

	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{acquireCall(1, "q", waiter, 2, 0)}})
	if e := p.results(1)[1].GetError(); e == nil || connect.Code(e.Code) != connect.CodeInvalidArgument || !strings.Contains(e.Message, "already in flight") {
		t.Fatalf("duplicate id: %v, want invalid argument", e)
	}

	p.send(&fencedv1.PipelineRequest{Cancel: []uint64{1}})
	// The answer to a cancelled call is whatever its unary call returns
	// when its client goes away; it must not be a grant.
	if r := p.results(1)[1]; r.GetAcquire().GetGranted() {
		t.Fatalf("cancelled wait answered %v, want no grant", r)
	}
	waitFor(t, "the waiter to leave the queue", func() bool { return len(a.describe(t, "q").Waiters) == 0 })
}

// Ending the stream cancels the calls in flight on it.
func TestPipeline_StreamEndCancelsWaits(t *testing.T) {
	a := newAPI(t)
	holder, waiter := a.session(t, 30000), a.session(t, 30000)
	a.acquire(t, "e", holder, 1, 0)
	stream := a.locks.Pipeline(context.Background())
	if err := stream.Send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{acquireCall(1, "e", waiter, 1, 60000)}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the waiter to queue", func() bool { return len(a.describe(t, "e").Waiters) == 1 })
	stream.CloseRequest()
	stream.CloseResponse()
	waitFor(t, "the waiter to leave the queue", func() bool { return len(a.describe(t, "e").Waiters) == 0 })
}

// Many renewals in one KeepAlive message are each answered.
func TestKeepAlive_ManyRenewalsInOneMessage(t *testing.T) {
	a := newAPI(t)
	var reqs []*fencedv1.KeepAliveRequest
	want := map[uint64]uint64{} // nonce -> session
	for i := range 50 {
		s := a.session(t, 5000)
		reqs = append(reqs, &fencedv1.KeepAliveRequest{Session: s, Secret: secretOf(s), Nonce: uint64(100 + i)})
		want[uint64(100+i)] = s
	}
	reqs = append(reqs, &fencedv1.KeepAliveRequest{Session: 424242, Nonce: 7}) // unknown
	stream := a.sessions.KeepAlive(context.Background())
	defer stream.CloseResponse()
	first := reqs[0]
	first.More = reqs[1:]
	if err := stream.Send(first); err != nil {
		t.Fatal(err)
	}
	got := map[uint64]*fencedv1.KeepAliveResponse{}
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < len(reqs) && time.Now().Before(deadline) {
		resp, err := stream.Receive()
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		for _, r := range append([]*fencedv1.KeepAliveResponse{resp}, resp.More...) {
			got[r.Nonce] = r
		}
	}
	stream.CloseRequest()
	for nonce, s := range want {
		if r := got[nonce]; r == nil || r.Session != s || r.Gone || r.TtlMs != 5000 {
			t.Fatalf("renewal of session %d (nonce %d): %v", s, nonce, r)
		}
	}
	if r := got[7]; r == nil || !r.Gone {
		t.Fatalf("renewal of an unknown session: %v, want gone", r)
	}
}

// A call and its cancellation in one message: the call is cancelled, not
// left to wait.
func TestPipeline_CancelInTheCallsMessage(t *testing.T) {
	a := newAPI(t)
	holder, waiter := a.session(t, 30000), a.session(t, 30000)
	a.acquire(t, "m", holder, 1, 0)
	p := a.pipeline(t)
	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{acquireCall(1, "m", waiter, 1, 60000)}, Cancel: []uint64{1}})
	answered := make(chan *fencedv1.PipelineResponse, 1)
	go func() {
		for {
			resp, err := p.stream.Receive() // nil once the stream is closed
			if err != nil || len(resp.GetResults()) > 0 {
				answered <- resp
				return
			}
		}
	}()
	select {
	case resp := <-answered:
		if len(resp.GetResults()) != 1 || resp.GetResults()[0].GetAcquire().GetGranted() {
			t.Fatalf("cancelled wait answered %v, want one answer, no grant", resp)
		}
		// The cancel may land while the acquire's proposal is in flight:
		// the answer is then "outcome unknown" (Unavailable), the acquire
		// may still apply and queue, and the contract (server/lock.go) is
		// that the caller withdraws it, as the SDK does. Any other error
		// is a failure.
		// A cancel before the proposal was handed to raft answers
		// Canceled: nothing was applied.
		if e := resp.GetResults()[0].GetError(); e != nil && connect.Code(e.GetCode()) != connect.CodeCanceled {
			if connect.Code(e.GetCode()) != connect.CodeUnavailable || !strings.Contains(e.GetMessage(), "may or may not") {
				t.Fatalf("cancelled wait answered %v, want no grant, Canceled or an unknown outcome", e)
			}
			p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{{Id: 2, Call: &fencedv1.PipelineCall_Release{Release: &fencedv1.ReleaseRequest{Name: "m", Session: waiter, WithdrawSeq: 1, Secret: secretOf(waiter)}}}}})
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a call cancelled in its own message still waits after 10s")
	}
	waitFor(t, "the waiter to leave the queue", func() bool { return len(a.describe(t, "m").Waiters) == 0 })
}

// A release whose withdraw_seq names an acquire of the same session, sent
// before it in one message, leaves the lock free whichever is applied
// first.
func TestPipeline_WithdrawOvertakingItsAcquire(t *testing.T) {
	a := newAPI(t)
	s, other := a.session(t, 30000), a.session(t, 30000)
	p := a.pipeline(t)
	for i := range uint64(50) {
		name := "w" + strconv.FormatUint(i, 10)
		seq := 2*i + 1
		p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{
			{Id: 2*i + 2, Call: &fencedv1.PipelineCall_Release{Release: &fencedv1.ReleaseRequest{Name: name, Session: s, WithdrawSeq: seq, Secret: secretOf(s)}}},
			acquireCall(2*i+1, name, s, seq, 0),
		}})
		p.results(2)
		if r, err := a.acquire(t, name, other, i+1, 0); err != nil || !r.Granted {
			t.Fatalf("try %d: another session's acquire after the withdrawal: %v %v", i, r, err)
		}
	}
}

// A pipelined acquire that waits is not cut at the proposal timeout
// (only its proposal is bounded by it), while a release and an acquire
// without a wait, which carry that deadline from the start, are answered
// as before.
func TestPipeline_WaitOutlastsProposeTimeout(t *testing.T) {
	const proposeTimeout = 300 * time.Millisecond
	a := newAPI(t, func(c *server.Config) { c.ProposeTimeout = proposeTimeout })
	holder, waiter := a.session(t, 30000), a.session(t, 30000)
	p := a.pipeline(t)
	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{acquireCall(1, "long", holder, 1, 0)}})
	if r := p.results(1)[1]; !r.GetAcquire().GetGranted() {
		t.Fatalf("acquire without a wait: %v", r)
	}
	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{acquireCall(2, "long", waiter, 1, 60000)}})
	waitFor(t, "the waiter to queue", func() bool { return len(a.describe(t, "long").Waiters) == 1 })
	time.Sleep(3 * proposeTimeout) // the wait outlasts the proposal timeout; not a synchronisation
	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{{Id: 3, Call: &fencedv1.PipelineCall_Release{Release: &fencedv1.ReleaseRequest{Name: "long", Session: holder, Secret: secretOf(holder), Seq: 2}}}}})
	got := p.results(2)
	if r := got[3].GetRelease(); r == nil {
		t.Fatalf("release: %v", got[3])
	}
	if r := got[2]; !r.GetAcquire().GetGranted() {
		t.Fatalf("the wait that outlasted the proposal timeout: %v, want the grant", r)
	}
}

// A Pipeline stream's first response comes before any call is sent,
// holds no result and names every kind of call the Pipeline takes
// (PipelineResponse.calls), so a client knows what to send it; later
// responses name none.
func TestPipeline_FirstResponseNamesTheCallsItTakes(t *testing.T) {
	a := newAPI(t)
	s := a.session(t, 30000)
	p := a.pipeline(t)
	// A call nobody answers soon: the first response cannot be its answer.
	holder := a.session(t, 30000)
	a.acquire(t, "busy", holder, 1, 0)
	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{acquireCall(1, "busy", s, 1, 60000)}})
	first, err := p.stream.Receive()
	if err != nil {
		t.Fatal(err)
	}
	want := []fencedv1.PipelineCallKind{fencedv1.PipelineCallKind_PIPELINE_CALL_KIND_LOCK_AND_KV, fencedv1.PipelineCallKind_PIPELINE_CALL_KIND_QUEUE, fencedv1.PipelineCallKind_PIPELINE_CALL_KIND_QUEUE_BATCH, fencedv1.PipelineCallKind_PIPELINE_CALL_KIND_LIMITER, fencedv1.PipelineCallKind_PIPELINE_CALL_KIND_SEMAPHORE, fencedv1.PipelineCallKind_PIPELINE_CALL_KIND_RWLOCK}
	if len(first.GetResults()) != 0 || fmt.Sprint(first.GetCalls()) != fmt.Sprint(want) {
		t.Fatalf("first response %v, want no results and the calls %v", first, want)
	}
	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{acquireCall(2, "free", s, 2, 0)}})
	next, err := p.stream.Receive()
	if err != nil {
		t.Fatal(err)
	}
	if len(next.GetCalls()) != 0 || len(next.GetResults()) != 1 || next.GetResults()[0].GetId() != 2 {
		t.Fatalf("second response %v, want the answer of call 2 alone, no calls named", next)
	}
}
