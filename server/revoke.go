package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// maxRevokeReasonLen bounds the reason of a revocation (it is logged).
const maxRevokeReasonLen = 1024

// errRevokeDisabled refuses Revoke on a server with neither
// Config.AllowRevoke nor Config.AuthFile.
var errRevokeDisabled = errors.New("force-revoke is disabled on this server; start every member with --auth-file (then identities with admin on the name may revoke) or with --allow-revoke (then anyone who can reach the API may revoke)")

// Revoke implements LockServiceHandler: an administrator's force-revoke.
// The session holding the lock ends as if it expired (every grant and wait
// of it ends), KeepAlive streams that renew it are told at once, and the
// lock goes to its first waiter with a higher token. Each revocation is
// logged at WARN with the lock, session, token, reason and caller.
func (h *lockService) Revoke(ctx context.Context, req *connect.Request[fencedv1.RevokeRequest]) (*connect.Response[fencedv1.RevokeResponse], error) {
	m := req.Msg
	// With an auth file, the interceptor has checked admin on the name.
	if !h.s.cfg.AllowRevoke && h.s.auth == nil {
		return nil, connect.NewError(connect.CodePermissionDenied, errRevokeDisabled)
	}
	if err := fence.ValidateName(m.Name); err != nil {
		return nil, toConnect(err)
	}
	if len(m.Reason) > maxRevokeReasonLen {
		return nil, toConnect(fmt.Errorf("%w: reason is %d bytes, longer than %d", fence.ErrInvalidArgument, len(m.Reason), maxRevokeReasonLen))
	}
	res, err := h.s.propose(ctx, &statev1.Command{Op: &statev1.Command_Revoke{Revoke: &statev1.Revoke{Name: m.Name, Token: m.Token}}})
	if err != nil {
		return nil, toConnect(err)
	}
	attrs := []slog.Attr{slog.String("name", m.Name), slog.String("reason", m.Reason),
		slog.String("caller", req.Peer().Addr), slog.String("forwarded_by", req.Header().Get(headerForwardedBy))}
	if !res.Ended {
		h.s.log.LogAttrs(ctx, slog.LevelInfo, "revoke: nothing to revoke (the lock is free or held under another token)",
			append(attrs, slog.Uint64("token", m.Token))...)
		return connect.NewResponse(&fencedv1.RevokeResponse{}), nil
	}
	h.s.log.LogAttrs(ctx, slog.LevelWarn, "lock revoked: its holding session was ended",
		append(attrs, slog.Uint64("session", res.Session), slog.Uint64("token", uint64(res.Grant.Token)))...)
	return connect.NewResponse(&fencedv1.RevokeResponse{Revoked: true, Grant: grantProto(res.Grant)}), nil
}
