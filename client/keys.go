package client

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// SigningKeys returns the cluster's public grant-signing keys, as the
// leader has them (a linearizable read): a fence.KeySet that verifies the
// signed grants (fence.Grant's Signed) offline, for guard.Signed. It is
// the same set every member serves at GET /.well-known/fenced-keys, which
// fence.LoadKeySet reads without this SDK. Load it again after a rotation
// (`fenced keys rotate`): a set loaded before does not know the new key.
func (c *Client) SigningKeys(ctx context.Context) (*fence.KeySet, error) {
	var out *fencedv1.ListKeysResponse
	err := c.retry(ctx, "list keys", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		r, err := ep.keys.ListKeys(ctx, connect.NewRequest(&fencedv1.ListKeysRequest{}))
		if err == nil {
			out = r.Msg
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	keys := make([]fence.PublicKey, 0, len(out.Keys))
	for _, k := range out.Keys {
		keys = append(keys, fence.PublicKey{ID: k.Id, CreatedAt: time.UnixMilli(k.CreatedAtUnixMs).UTC(), Key: k.PublicKey})
	}
	ks, err := fence.NewKeySet(out.Issuer, out.Current, keys)
	if err != nil {
		return nil, fmt.Errorf("client: signing keys: %w", err)
	}
	return ks, nil
}

// RotateSigningKeys makes the cluster sign new grants with a new key and
// keep the newest keep keys published (0: 3; 1 withdraws every earlier
// key at once, for a key that leaked). It needs admin and is audited with
// reason. It returns the new key and the ids of the keys dropped. A retry
// after a lost reply may rotate twice.
func (c *Client) RotateSigningKeys(ctx context.Context, keep int, reason string) (fence.PublicKey, []string, error) {
	if keep < 0 || keep > 16 {
		return fence.PublicKey{}, nil, fmt.Errorf("client: %w: keep %d keys is outside 0..16", fence.ErrInvalidArgument, keep)
	}
	var out *fencedv1.RotateKeysResponse
	err := c.retry(ctx, "rotate keys", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		r, err := ep.keys.RotateKeys(ctx, connect.NewRequest(&fencedv1.RotateKeysRequest{Keep: uint32(keep), Reason: reason}))
		if err == nil {
			out = r.Msg
		}
		return err
	})
	if err != nil {
		return fence.PublicKey{}, nil, err
	}
	k := out.GetKey()
	return fence.PublicKey{ID: k.GetId(), CreatedAt: time.UnixMilli(k.GetCreatedAtUnixMs()).UTC(), Key: k.GetPublicKey()}, out.Dropped, nil
}
