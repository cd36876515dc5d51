package client

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// ClusterStatus returns the members with their roles and lag, the leader,
// term, commit index and last token, as the leader sees them.
func (c *Client) ClusterStatus(ctx context.Context) (*fencedv1.ClusterStatusResponse, error) {
	var out *fencedv1.ClusterStatusResponse
	err := c.retry(ctx, "cluster status", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		r, err := ep.cluster.Status(ctx, connect.NewRequest(&fencedv1.ClusterStatusRequest{}))
		if err == nil {
			out = r.Msg
		}
		return err
	})
	return out, err
}

// AddMember adds a voter with id at peerAddr (HOST:PORT). Start the new
// node first with `fenced serve --join` and an empty data dir. Adding an
// id or address already in the cluster fails with fence.ErrInvalidArgument
// and changes nothing.
func (c *Client) AddMember(ctx context.Context, id, peerAddr string) error {
	if id == "" || peerAddr == "" {
		return fmt.Errorf("client: %w: add member needs an id and a peer address", fence.ErrInvalidArgument)
	}
	return c.retry(ctx, "cluster add", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		_, err := ep.cluster.AddMember(ctx, connect.NewRequest(&fencedv1.AddMemberRequest{Id: id, PeerAddr: peerAddr}))
		return err
	})
}

// RemoveMember removes the member id. Removing the last voter is refused.
func (c *Client) RemoveMember(ctx context.Context, id string) error {
	if id == "" {
		return fmt.Errorf("client: %w: remove member needs an id", fence.ErrInvalidArgument)
	}
	return c.retry(ctx, "cluster remove", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		_, err := ep.cluster.RemoveMember(ctx, connect.NewRequest(&fencedv1.RemoveMemberRequest{Id: id}))
		return err
	})
}

// TransferLeader hands leadership to the member id, or to any other member
// when id is empty, and returns the leader it reports afterwards.
func (c *Client) TransferLeader(ctx context.Context, id string) (string, error) {
	var leader string
	err := c.retry(ctx, "cluster transfer-leader", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		r, err := ep.cluster.TransferLeader(ctx, connect.NewRequest(&fencedv1.TransferLeaderRequest{Id: id}))
		if err == nil {
			leader = r.Msg.GetLeader()
		}
		return err
	})
	return leader, err
}
