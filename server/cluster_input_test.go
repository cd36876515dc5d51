package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/fenced-dev/fenced/internal/testserver"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// RegisterNode and the membership calls refuse unbounded or malformed node
// ids and addresses with InvalidArgument, and change nothing.
func TestCluster_BadNodeFieldsChangeNothing(t *testing.T) {
	srv := testserver.Start(t)
	c := fencedv1connect.NewClusterServiceClient(http.DefaultClient, "http://"+srv.Addr())
	ctx := context.Background()
	members := func() string {
		resp, err := c.Status(ctx, connect.NewRequest(&fencedv1.ClusterStatusRequest{}))
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		var b strings.Builder
		for _, m := range resp.Msg.Members {
			b.WriteString(m.Id + "=" + m.PeerAddr + "/" + m.ApiAddr + " ")
		}
		return b.String()
	}
	before := members()
	long := strings.Repeat("n", 129)
	for _, tt := range []struct {
		name string
		call func() error
		msg  string
	}{
		{"register: empty id", func() error {
			_, err := c.RegisterNode(ctx, connect.NewRequest(&fencedv1.RegisterNodeRequest{ApiAddr: "127.0.0.1:1"}))
			return err
		}, "node id is empty"},
		{"register: long id", func() error {
			_, err := c.RegisterNode(ctx, connect.NewRequest(&fencedv1.RegisterNodeRequest{Id: long, ApiAddr: "127.0.0.1:1"}))
			return err
		}, "node id is 129 bytes; want at most 128"},
		{"register: id with a bidi control", func() error {
			_, err := c.RegisterNode(ctx, connect.NewRequest(&fencedv1.RegisterNodeRequest{Id: "n\u202e1", ApiAddr: "127.0.0.1:1"}))
			return err
		}, "U+202E"},
		{"register: address without a port", func() error {
			_, err := c.RegisterNode(ctx, connect.NewRequest(&fencedv1.RegisterNodeRequest{Id: "n9", ApiAddr: "127.0.0.1"}))
			return err
		}, "is not HOST:PORT"},
		{"register: long address", func() error {
			_, err := c.RegisterNode(ctx, connect.NewRequest(&fencedv1.RegisterNodeRequest{Id: "n9", ApiAddr: strings.Repeat("a", 400) + ":1"}))
			return err
		}, "longer than 300"},
		{"register: address with a path", func() error {
			_, err := c.RegisterNode(ctx, connect.NewRequest(&fencedv1.RegisterNodeRequest{Id: "n1", ApiAddr: "evil.example/x:80"}))
			return err
		}, "want a host name or an IP address"},
		{"add: long id", func() error {
			_, err := c.AddMember(ctx, connect.NewRequest(&fencedv1.AddMemberRequest{Id: long, PeerAddr: "127.0.0.1:1"}))
			return err
		}, "want at most 128"},
		{"add: port 0", func() error {
			_, err := c.AddMember(ctx, connect.NewRequest(&fencedv1.AddMemberRequest{Id: "n9", PeerAddr: "127.0.0.1:0"}))
			return err
		}, "want a number from 1 to 65535"},
		{"remove: long id", func() error {
			_, err := c.RemoveMember(ctx, connect.NewRequest(&fencedv1.RemoveMemberRequest{Id: long}))
			return err
		}, "want at most 128"},
		{"transfer: id with a space", func() error {
			_, err := c.TransferLeader(ctx, connect.NewRequest(&fencedv1.TransferLeaderRequest{Id: "n 1"}))
			return err
		}, "spaces or control characters"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error=%v, want InvalidArgument mentioning %q", err, tt.msg)
			}
			if after := members(); after != before {
				t.Fatalf("members changed by a refused call:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}
