package client

import (
	"context"
	"fmt"
	"iter"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// The server answers Status, List and Describe a bounded page at a time
// (at most 1000 locks and sessions, or waiters; each lock listed with at
// most 100 of its waiters). StatusPage reads one page; Status and Locks
// follow the pages. The state may change between pages: a page is a
// consistent view, the walk is not.

// Status returns the server's view: issuer, last token, sessions, and the
// locks (only name's, when name is not empty), following every page and
// merging them (hidden_locks and hidden_sessions add up what the caller
// may not read); the node fields are those of the last page. It holds the
// whole view in memory: for a large cluster, walk StatusPage instead.
func (c *Client) Status(ctx context.Context, name string) (*fencedv1.StatusResponse, error) {
	var out *fencedv1.StatusResponse
	token := ""
	for {
		page, err := c.StatusPage(ctx, name, 0, token)
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = page
		} else {
			locks, sessions := append(out.Locks, page.Locks...), append(out.Sessions, page.Sessions...)
			hl, hs := out.HiddenLocks+page.HiddenLocks, out.HiddenSessions+page.HiddenSessions
			out = page
			out.Locks, out.Sessions = locks, sessions
			out.HiddenLocks, out.HiddenSessions = hl, hs
		}
		if token = page.NextPageToken; token == "" {
			return out, nil
		}
	}
}

// StatusPage returns one page of the server's view: up to pageSize locks
// and then sessions (0: the server's default, 1000, which is also the
// most) from pageToken, the NextPageToken of the previous page ("" for
// the first). NextPageToken is empty on the last page.
func (c *Client) StatusPage(ctx context.Context, name string, pageSize int, pageToken string) (*fencedv1.StatusResponse, error) {
	if name != "" {
		if err := fence.ValidateName(name); err != nil {
			return nil, fmt.Errorf("client: %w", err)
		}
	}
	if pageSize < 0 || pageSize > 1000 {
		return nil, fmt.Errorf("client: %w: page size %d is out of range; want 0 (default) to 1000", fence.ErrInvalidArgument, pageSize)
	}
	var out *fencedv1.StatusResponse
	err := c.retry(ctx, "status", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		r, err := ep.locks.Status(ctx, connect.NewRequest(&fencedv1.StatusRequest{Name: name, PageSize: int32(pageSize), PageToken: pageToken}))
		if err == nil {
			out = r.Msg
		}
		return err
	})
	return out, err
}

// Locks iterates over the locks whose names start with prefix, in name
// order, reading them a page at a time (List). Each lock carries at most
// 100 of its waiters (WaiterCount has their number). Locks the caller may
// not read are skipped (ListResponse.hidden_locks counts them). The
// iteration ends after the first error, which it yields.
func (c *Client) Locks(ctx context.Context, prefix string) iter.Seq2[*fencedv1.LockInfo, error] {
	return func(yield func(*fencedv1.LockInfo, error) bool) {
		token := ""
		for {
			var page *fencedv1.ListResponse
			err := c.retry(ctx, "list", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
				r, err := ep.locks.List(ctx, connect.NewRequest(&fencedv1.ListRequest{Prefix: prefix, PageToken: token}))
				if err == nil {
					page = r.Msg
				}
				return err
			})
			if err != nil {
				yield(nil, err)
				return
			}
			for _, l := range page.Locks {
				if !yield(l, nil) {
					return
				}
			}
			if token = page.NextPageToken; token == "" {
				return
			}
		}
	}
}
