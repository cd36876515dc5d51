package server_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fenced-dev/fenced/internal/testserver"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
	"github.com/fenced-dev/fenced/server"
)

// Elections are authorized like locks: campaign, proclaim and resign need
// acquire on the name, leader and observe need read; a denied campaign
// changes nothing.
func TestAuth_Elections(t *testing.T) {
	srv, _, _ := startAuth(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	app, reader, admin := asIdentity(srv.Addr(), appToken), asIdentity(srv.Addr(), readerToken), asIdentity(srv.Addr(), adminToken)
	elections := func(a *authAPI) fencedv1connect.ElectionServiceClient {
		return fencedv1connect.NewElectionServiceClient(a.hc, a.base)
	}
	sess, secret := app.session(t)
	won, err := elections(app).Campaign(ctx, connect.NewRequest(&fencedv1.CampaignRequest{Name: "orders/leader", Session: sess, Secret: secret, Value: []byte("a")}))
	if err != nil || !won.Msg.Elected || won.Msg.Grant.GetKind() != "leader" || won.Msg.Grant.GetScope() != "orders/leader" {
		t.Fatalf("app campaigns for orders/leader: %v %v", won, err)
	}
	_, err = elections(app).Campaign(ctx, connect.NewRequest(&fencedv1.CampaignRequest{Name: "billing/leader", Session: sess, Secret: secret}))
	denied(t, "app campaigns for billing/leader", err, `"acquire"`, `"billing/leader"`)
	_, err = elections(app).Proclaim(ctx, connect.NewRequest(&fencedv1.ProclaimRequest{Name: "billing/leader", Session: sess, Secret: secret}))
	denied(t, "app proclaims in billing/leader", err, `"acquire"`)
	if l, err := elections(admin).Leader(ctx, connect.NewRequest(&fencedv1.LeaderRequest{Name: "billing/leader"})); err != nil || l.Msg.HasLeader {
		t.Fatalf("after the denied campaign billing/leader has %v (%v), want no leader", l, err)
	}

	l, err := elections(reader).Leader(ctx, connect.NewRequest(&fencedv1.LeaderRequest{Name: "orders/leader"}))
	if err != nil || l.Msg.Grant.GetToken() != won.Msg.Grant.GetToken() || string(l.Msg.Value) != "a" {
		t.Fatalf("reader reads the leader of orders/leader: %v %v", l, err)
	}
	_, err = elections(reader).Resign(ctx, connect.NewRequest(&fencedv1.ResignRequest{Name: "orders/leader", Session: sess, Secret: secret}))
	denied(t, "reader resigns", err, `"acquire"`)
	_, err = elections(reader).Leader(ctx, connect.NewRequest(&fencedv1.LeaderRequest{Name: "billing/leader"}))
	denied(t, "reader reads billing/leader", err, `"read"`)

	stream, err := elections(reader).Observe(ctx, connect.NewRequest(&fencedv1.ObserveRequest{Name: "orders/leader"}))
	if err != nil || !stream.Receive() || stream.Msg().Leader.GetToken() != won.Msg.Grant.GetToken() {
		t.Fatalf("reader observes orders/leader: %v %v", err, stream.Err())
	}
	stream.Close()
	stream, err = elections(reader).Observe(ctx, connect.NewRequest(&fencedv1.ObserveRequest{Name: "billing/leader"}))
	if err == nil && stream.Receive() {
		t.Fatalf("reader observed billing/leader: %v", stream.Msg())
	}
	if err == nil {
		err = stream.Err()
	}
	denied(t, "reader observes billing/leader", err, `"read"`)
}

// An Observe stream lasts for as long as its client keeps it: it outlives
// --body-timeout and is pushed a change made long after it opened.
func TestElection_ObserveOutlivesBodyTimeout(t *testing.T) {
	srv := testserver.Start(t, func(c *server.Config) { c.Limits.BodyTimeout = 200 * time.Millisecond })
	api := asIdentity(srv.Addr(), "")
	elections := fencedv1connect.NewElectionServiceClient(api.hc, api.base)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := elections.Observe(ctx, connect.NewRequest(&fencedv1.ObserveRequest{Name: "long"}))
	if err != nil || !stream.Receive() {
		t.Fatalf("Observe: %v %v", err, stream.Err())
	}
	defer stream.Close()
	time.Sleep(time.Second) // five body timeouts
	sess, secret := api.session(t)
	if _, err := elections.Campaign(ctx, connect.NewRequest(&fencedv1.CampaignRequest{Name: "long", Session: sess, Secret: secret})); err != nil {
		t.Fatal(err)
	}
	if !stream.Receive() || !stream.Msg().HasLeader {
		t.Fatalf("no change pushed to a stream older than the body timeout: %v", stream.Err())
	}
}

// The election metrics count terms, changes, led elections, candidates and
// open observers.
func TestElection_Metrics(t *testing.T) {
	srv := testserver.Start(t)
	api := asIdentity(srv.Addr(), "")
	elections := fencedv1connect.NewElectionServiceClient(api.hc, api.base)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := elections.Observe(ctx, connect.NewRequest(&fencedv1.ObserveRequest{Name: "m"}))
	if err != nil || !stream.Receive() {
		t.Fatalf("Observe: %v", err)
	}
	defer stream.Close()
	a, as := api.session(t)
	b, bs := api.session(t)
	for _, c := range []*fencedv1.CampaignRequest{{Name: "m", Session: a, Secret: as, Seq: 1}, {Name: "m", Session: b, Secret: bs, Seq: 1}} {
		if _, err := elections.Campaign(ctx, connect.NewRequest(c)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := elections.Proclaim(ctx, connect.NewRequest(&fencedv1.ProclaimRequest{Name: "m", Session: a, Secret: as, Seq: 2, Value: []byte("v")})); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + srv.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"fenced_election_terms_total 1", "fenced_election_changes_total 2", "fenced_elections_led 1", "fenced_election_candidates 1", "fenced_election_observers 1"} {
		if !strings.Contains(string(body), want+"\n") {
			t.Errorf("/metrics has no %q", want)
		}
	}
}
