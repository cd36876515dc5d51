package server_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/fenced-dev/fenced/internal/testserver"
	"github.com/fenced-dev/fenced/internal/wire"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
	"github.com/fenced-dev/fenced/server"
)

func queueCall(t *testing.T, id uint64, call *fencedv1.QueueCall) *fencedv1.PipelineCall {
	t.Helper()
	raw, err := proto.Marshal(call)
	if err != nil {
		t.Fatal(err)
	}
	return &fencedv1.PipelineCall{Id: id, Call: &fencedv1.PipelineCall_Queue{Queue: raw}}
}

func queueResult(t *testing.T, r *fencedv1.PipelineResult) *fencedv1.QueueResult {
	t.Helper()
	if e := r.GetError(); e != nil {
		t.Fatalf("call %d failed: %v", r.GetId(), e)
	}
	var res fencedv1.QueueResult
	if err := proto.Unmarshal(r.GetQueue(), &res); err != nil {
		t.Fatalf("call %d: answer is not a QueueResult: %v", r.GetId(), err)
	}
	return &res
}

// Pipelined queue calls do what their unary calls do: a waiting claim
// sent before the push gets the item; an ack with a token that is not the
// claim's is refused as stale and changes nothing; the claim's ack
// removes the item; a call that is not a QueueCall, or has no call, is
// refused as invalid.
func TestPipeline_QueueCalls(t *testing.T) {
	a := newAPI(t)
	queues := fencedv1connect.NewQueueServiceClient(&http.Client{Transport: a.counter}, "http://"+a.addr)
	s := a.session(t, 30000)
	// A grant first, so that the claim's token is not the first: the token
	// below it is one the cluster issued, not the item's claim.
	if r, err := a.acquire(t, "before", s, 100, 0); err != nil || !r.Granted {
		t.Fatalf("acquire: %v %v", r, err)
	}
	p := a.pipeline(t)
	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{
		queueCall(t, 1, &fencedv1.QueueCall{Call: &fencedv1.QueueCall_Claim{Claim: &fencedv1.QueueClaimRequest{
			Queue: "jobs", Session: s, Secret: secretOf(s), Seq: 1, VisibilityMs: 30000, WaitMs: 20000}}}),
	}})
	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{
		queueCall(t, 2, &fencedv1.QueueCall{Call: &fencedv1.QueueCall_Push{Push: &fencedv1.QueuePushRequest{Queue: "jobs", Payload: []byte("j1")}}}),
		{Id: 3, Call: &fencedv1.PipelineCall_Queue{Queue: []byte{0xff, 0xff, 0xff}}},
		queueCall(t, 4, &fencedv1.QueueCall{}),
	}})
	got := p.results(4)
	item := queueResult(t, got[2]).GetPush().GetItem()
	claim := queueResult(t, got[1]).GetClaim()
	if item == 0 || !claim.GetClaimed() || claim.GetClaim().GetItem() != item || string(claim.GetClaim().GetPayload()) != "j1" {
		t.Fatalf("push %v, waiting claim %v: want the pushed item claimed", got[2], claim)
	}
	for _, id := range []uint64{3, 4} {
		if e := got[id].GetError(); e == nil || connect.Code(e.Code) != connect.CodeInvalidArgument {
			t.Errorf("call %d: %v, want InvalidArgument", id, got[id])
		}
	}
	token := claim.GetClaim().GetGrant().GetToken()
	before, err := queues.Stats(context.Background(), connect.NewRequest(&fencedv1.QueueStatsRequest{Queue: "jobs", Items: 10}))
	if err != nil {
		t.Fatal(err)
	}
	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{
		queueCall(t, 5, &fencedv1.QueueCall{Call: &fencedv1.QueueCall_Ack{Ack: &fencedv1.QueueAckRequest{Queue: "jobs", Item: item, Token: token - 1}}}),
	}})
	r := p.results(1)[5]
	if e := r.GetError(); e == nil || connect.Code(e.Code) != connect.CodeFailedPrecondition || e.Meta[wire.HeaderReason] != wire.ReasonStaleToken {
		t.Fatalf("ack with a stale token: %v, want FailedPrecondition (stale-token)", r)
	}
	after, err := queues.Stats(context.Background(), connect.NewRequest(&fencedv1.QueueStatsRequest{Queue: "jobs", Items: 10}))
	if err != nil || !proto.Equal(before.Msg, after.Msg) || after.Msg.Claimed != 1 {
		t.Fatalf("a refused ack changed the queue:\nbefore %v\nafter  %v (%v)", before.Msg, after.Msg, err)
	}
	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{
		queueCall(t, 6, &fencedv1.QueueCall{Call: &fencedv1.QueueCall_Ack{Ack: &fencedv1.QueueAckRequest{Queue: "jobs", Item: item, Token: token}}}),
	}})
	queueResult(t, p.results(1)[6])
	st, err := queues.Stats(context.Background(), connect.NewRequest(&fencedv1.QueueStatsRequest{Queue: "jobs"}))
	if err != nil || st.Msg.Claimed != 0 || st.Msg.Available != 0 {
		t.Fatalf("stats after the ack: %v %v, want an empty queue", st, err)
	}
}

// Pipelined queue calls are authorized as their unary calls: a worker
// (acquire) cannot push, a producer (enqueue) cannot claim.
func TestPipeline_QueueCallsAuthorized(t *testing.T) {
	authFile := filepath.Join(t.TempDir(), "auth.jsonl")
	data := authLine(t, "producer", producerToken, server.AuthRole{Prefix: "orders", Permissions: []string{"enqueue"}}) +
		authLine(t, "worker", workerToken, server.AuthRole{Prefix: "orders", Permissions: []string{"acquire", "read"}})
	if err := os.WriteFile(authFile, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := testserver.Start(t, func(c *server.Config) { c.AuthFile = authFile })
	pipeOf := func(token string) *pipe {
		stream := asIdentity(srv.Addr(), token).locks.Pipeline(context.Background())
		t.Cleanup(func() { stream.CloseRequest(); stream.CloseResponse() })
		return &pipe{t: t, stream: stream}
	}
	push := &fencedv1.QueueCall{Call: &fencedv1.QueueCall_Push{Push: &fencedv1.QueuePushRequest{Queue: "orders", Payload: []byte("o1")}}}
	w := asIdentity(srv.Addr(), workerToken)
	sess, secret := w.session(t)
	claim := &fencedv1.QueueCall{Call: &fencedv1.QueueCall_Claim{Claim: &fencedv1.QueueClaimRequest{Queue: "orders", Session: sess, Secret: secret, Seq: 1, VisibilityMs: 30000}}}

	worker, producer := pipeOf(workerToken), pipeOf(producerToken)
	worker.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{queueCall(t, 1, push)}})
	if e := worker.results(1)[1].GetError(); e == nil || connect.Code(e.Code) != connect.CodePermissionDenied {
		t.Fatalf("worker pushes through the pipeline: %v, want PermissionDenied", e)
	}
	producer.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{queueCall(t, 1, claim)}})
	if e := producer.results(1)[1].GetError(); e == nil || connect.Code(e.Code) != connect.CodePermissionDenied {
		t.Fatalf("producer claims through the pipeline: %v, want PermissionDenied", e)
	}
	producer.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{queueCall(t, 2, push)}})
	queueResult(t, producer.results(1)[2])
	worker.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{queueCall(t, 2, claim)}})
	if c := queueResult(t, worker.results(1)[2]).GetClaim(); !c.GetClaimed() || string(c.GetClaim().GetPayload()) != "o1" {
		t.Fatalf("worker claims through the pipeline: %v, want the producer's item", c)
	}
}

// A pipelined claim with an ack (ack-and-claim-next) acks the previous
// item and claims the next in one call; its retry answers the same claim
// and "acked" without acking again; a stale ack is reported as stale and
// the claim still goes on; an ack without its token is refused whole.
func TestPipeline_QueueAckWithClaim(t *testing.T) {
	a := newAPI(t)
	queues := fencedv1connect.NewQueueServiceClient(&http.Client{Transport: a.counter}, "http://"+a.addr)
	s := a.session(t, 30000)
	p := a.pipeline(t)
	claimCall := func(id, seq, ackItem, ackToken uint64) *fencedv1.PipelineCall {
		return queueCall(t, id, &fencedv1.QueueCall{Call: &fencedv1.QueueCall_Claim{Claim: &fencedv1.QueueClaimRequest{
			Queue: "jobs", Session: s, Secret: secretOf(s), Seq: seq, VisibilityMs: 30000, AckItem: ackItem, AckToken: ackToken}}})
	}
	for i, pl := range []string{"j1", "j2", "j3"} {
		p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{
			queueCall(t, uint64(i+1), &fencedv1.QueueCall{Call: &fencedv1.QueueCall_Push{Push: &fencedv1.QueuePushRequest{Queue: "jobs", Payload: []byte(pl)}}}),
		}})
		queueResult(t, p.results(1)[uint64(i+1)])
	}
	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{claimCall(10, 1, 0, 0)}})
	first := queueResult(t, p.results(1)[10]).GetClaim()
	if !first.GetClaimed() || first.GetAckOutcome() != fencedv1.AckOutcome_ACK_OUTCOME_NONE {
		t.Fatalf("plain claim: %v", first)
	}
	item1, tok1 := first.GetClaim().GetItem(), first.GetClaim().GetGrant().GetToken()
	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{claimCall(11, 2, item1, tok1)}})
	next := queueResult(t, p.results(1)[11]).GetClaim()
	if !next.GetClaimed() || next.GetAckOutcome() != fencedv1.AckOutcome_ACK_OUTCOME_ACKED || string(next.GetClaim().GetPayload()) != "j2" {
		t.Fatalf("ack-and-claim-next: %v, want j1 acked and j2 claimed", next)
	}
	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{claimCall(12, 2, item1, tok1)}})
	retry := queueResult(t, p.results(1)[12]).GetClaim()
	if retry.GetAckOutcome() != fencedv1.AckOutcome_ACK_OUTCOME_ACKED || retry.GetClaim().GetGrant().GetToken() != next.GetClaim().GetGrant().GetToken() {
		t.Fatalf("retried ack-and-claim-next: %v, want the same claim %v and acked", retry, next)
	}
	// The first token again, in a new request: stale, and the claim goes on.
	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{claimCall(13, 3, item1, tok1)}})
	stale := queueResult(t, p.results(1)[13]).GetClaim()
	if stale.GetAckOutcome() != fencedv1.AckOutcome_ACK_OUTCOME_STALE || !stale.GetClaimed() || string(stale.GetClaim().GetPayload()) != "j3" {
		t.Fatalf("claim with a stale ack: %v, want stale and j3 claimed", stale)
	}
	before, err := queues.Stats(context.Background(), connect.NewRequest(&fencedv1.QueueStatsRequest{Queue: "jobs", Items: 10}))
	if err != nil || before.Msg.Claimed != 2 || before.Msg.Available != 0 {
		t.Fatalf("stats: %v %v, want j2 and j3 claimed", before, err)
	}
	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{claimCall(14, 4, next.GetClaim().GetItem(), 0)}})
	if e := p.results(1)[14].GetError(); e == nil || connect.Code(e.Code) != connect.CodeInvalidArgument {
		t.Fatalf("claim with ack_item but no ack_token: %v, want InvalidArgument", e)
	}
	after, err := queues.Stats(context.Background(), connect.NewRequest(&fencedv1.QueueStatsRequest{Queue: "jobs", Items: 10}))
	if err != nil || !proto.Equal(before.Msg, after.Msg) {
		t.Fatalf("a refused claim changed the queue:\nbefore %v\nafter  %v (%v)", before.Msg, after.Msg, err)
	}
}
