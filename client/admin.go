package client

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// ReleaseResult is the server's answer to a release: fence.Released,
// fence.AlreadyReleased or fence.NotOwned.
type ReleaseResult = fence.ReleaseResult

// Release answers.
const (
	// Released means the session held the lock and released it.
	Released = fence.Released
	// AlreadyReleased means the lock was free (or this release was applied
	// before and is being retried).
	AlreadyReleased = fence.AlreadyReleased
	// NotOwned means another session holds the lock; nothing changed.
	NotOwned = fence.NotOwned
)

func releaseResultOf(r fencedv1.ReleaseResult) ReleaseResult {
	switch r {
	case fencedv1.ReleaseResult_RELEASE_RESULT_RELEASED:
		return Released
	case fencedv1.ReleaseResult_RELEASE_RESULT_NOT_OWNED:
		return NotOwned
	}
	return AlreadyReleased
}

// Release releases the lock name held by session, for tools that hold a
// session id and its secret but not the Session (such as `fenced
// release`). Without the session's secret the server refuses it with an
// error wrapping fence.ErrNotOwner. It sends no sequence number: a retry
// after a lost reply may answer AlreadyReleased for a release that was in
// fact applied. Programs that hold a Session use Mutex.Unlock or
// Lease.Release.
func (c *Client) Release(ctx context.Context, name string, session uint64, secret string) (ReleaseResult, error) {
	if err := fence.ValidateName(name); err != nil {
		return "", fmt.Errorf("client: %w", err)
	}
	if session == 0 {
		return "", fmt.Errorf("client: %w: session is 0; give the session id the grant was made to", fence.ErrInvalidArgument)
	}
	res, err := releaseLock(ctx, c, name, session, secret, 0)
	if err != nil {
		return "", err
	}
	return releaseResultOf(res), nil
}

// Verify reports whether t is the current grant of the lock name, and
// returns the current grant (zero when the lock is free). It is a point in
// time answer: the grant may end right after. Resources protect writes with
// a guard, not with Verify.
func (c *Client) Verify(ctx context.Context, name string, t fence.Token) (bool, fence.Grant, error) {
	if err := fence.ValidateName(name); err != nil {
		return false, fence.Grant{}, fmt.Errorf("client: %w", err)
	}
	if err := fence.ValidateToken(t); err != nil {
		return false, fence.Grant{}, fmt.Errorf("client: %w", err)
	}
	var out *fencedv1.VerifyResponse
	err := c.retry(ctx, "verify", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		r, err := ep.locks.Verify(ctx, connect.NewRequest(&fencedv1.VerifyRequest{Name: name, Token: uint64(t)}))
		if err == nil {
			out = r.Msg
		}
		return err
	})
	if err != nil {
		return false, fence.Grant{}, err
	}
	var g fence.Grant
	if h := out.GetHolder(); h != nil {
		g = grantOf(h, h.GetSession(), 0)
	}
	return out.GetCurrent(), g, nil
}

// Revoke force-revokes the lock name: the server ends the session holding
// it (every grant and wait of that session end, and its SDK is told at
// once) and the lock goes to its first waiter with a higher token. With a
// token other than 0, only the grant with that token is revoked. reason is
// written to the server's log. It returns the grant revoked, and false
// when there was none (the lock was free, or held under another token).
// The server refuses it (PermissionDenied) unless it runs with
// --allow-revoke.
//
// With token 0, Revoke first reads the lock's current token and revokes
// that grant only, so that a retry after a lost reply can never revoke
// the next holder too.
func (c *Client) Revoke(ctx context.Context, name string, token fence.Token, reason string) (fence.Grant, bool, error) {
	if err := fence.ValidateName(name); err != nil {
		return fence.Grant{}, false, fmt.Errorf("client: %w", err)
	}
	if token == 0 {
		var info *fencedv1.LockInfo
		err := c.retry(ctx, "describe", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
			r, err := ep.locks.Describe(ctx, connect.NewRequest(&fencedv1.DescribeRequest{Name: name}))
			if err == nil {
				info = r.Msg.GetLock()
			}
			return err
		})
		if err != nil || info.GetHolder().GetToken() == 0 {
			return fence.Grant{}, false, err
		}
		token = fence.Token(info.GetHolder().GetToken())
	}
	var out *fencedv1.RevokeResponse
	err := c.retry(ctx, "revoke", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		r, err := ep.locks.Revoke(ctx, connect.NewRequest(&fencedv1.RevokeRequest{Name: name, Token: uint64(token), Reason: reason}))
		if err == nil {
			out = r.Msg
		}
		return err
	})
	if err != nil || !out.GetRevoked() {
		return fence.Grant{}, false, err
	}
	g := out.GetGrant()
	return grantOf(g, g.GetSession(), 0), true, nil
}
