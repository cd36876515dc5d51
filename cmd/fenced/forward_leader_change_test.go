package main_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fenced-dev/fenced/internal/proctest"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// h2cClient speaks cleartext HTTP/2, as a Connect stream needs.
func h2cClient(t *testing.T) *http.Client {
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// A unary call a follower forwarded is not cut when the follower sees the
// leader change while it is in flight: its answer, the leader's, reaches
// the client. The call is the one that changes the leader by design, a
// TransferLeader to the forwarding follower itself, sent once (no retry)
// through that follower alone, three times round the cluster: each
// answers the new leader's id. (Before, the follower cut every forwarded
// call on a change and special-cased TransferLeader by name; without the
// special case the client got an HTTP/2 INTERNAL_ERROR reset.)
func TestCluster_ForwardedUnaryCallSurvivesALeaderChange(t *testing.T) {
	servers := proctest.StartCluster(t, 3)
	hc := h2cClient(t)
	for round := range 3 {
		_, followers := leaderOf(t, servers)
		via := followers[round%len(followers)]
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := fencedv1connect.NewClusterServiceClient(hc, "http://"+via.Addr).TransferLeader(ctx, connect.NewRequest(&fencedv1.TransferLeaderRequest{Id: via.NodeID}))
		cancel()
		if err != nil {
			t.Fatalf("round %d: TransferLeader to %s through itself, a follower: %v", round, via.NodeID, err)
		}
		if res.Msg.GetLeader() != via.NodeID {
			t.Fatalf("round %d: TransferLeader answered leader %q, want %s", round, res.Msg.GetLeader(), via.NodeID)
		}
		eventually(t, "the new leader seen by every member", 20*time.Second, func() bool {
			return statusOf(t, proctest.Endpoints(servers)).Leader == via.NodeID
		})
	}
}

// A stream a follower forwarded is still cut when the follower sees the
// leader change: a Pipeline stream through a follower, open end to end
// (its first response arrived from the leader), ends once the leadership
// moves to the third member, instead of staying open on the old leader,
// which does not end a Pipeline stream when it steps down.
func TestCluster_ForwardedStreamCutOnALeaderChange(t *testing.T) {
	servers := proctest.StartCluster(t, 3)
	leader, followers := leaderOf(t, servers)
	via, target := followers[0], followers[1]
	hc := h2cClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stream := fencedv1connect.NewLockServiceClient(hc, "http://"+via.Addr).Pipeline(ctx)
	defer stream.CloseResponse()
	if err := stream.Send(&fencedv1.PipelineRequest{}); err != nil {
		t.Fatal(err)
	}
	first, err := stream.Receive()
	if err != nil || len(first.GetCalls()) == 0 {
		t.Fatalf("the stream's first response through %s: %v, %v", via.NodeID, first, err)
	}
	if _, err := fencedv1connect.NewClusterServiceClient(hc, "http://"+leader.Addr).TransferLeader(ctx, connect.NewRequest(&fencedv1.TransferLeaderRequest{Id: target.NodeID})); err != nil {
		t.Fatalf("transfer to %s: %v", target.NodeID, err)
	}
	ended := make(chan error, 1)
	go func() {
		for {
			if _, err := stream.Receive(); err != nil {
				ended <- err
				return
			}
		}
	}()
	select {
	case err := <-ended:
		t.Logf("the stream through %s ended: %v", via.NodeID, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("the Pipeline stream through %s is still open 30s after the leader moved from %s to %s", via.NodeID, leader.NodeID, target.NodeID)
	}
}
