package server

import (
	"context"
	"errors"
	"fmt"
	"net"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	fence "github.com/fenced-dev/fenced"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// Authorization: which permission each call needs, on which name. needOf
// is the one table; the interceptor applies it to every Connect call, and
// the two paths that reach the handlers without it, the Pipeline's calls
// and the kv's HTTP API, apply it too.

// registerNodePath is the procedure members register their API address with.
const registerNodePath = fencedv1connect.ClusterServiceRegisterNodeProcedure

// need is what a call needs: perm on name, or, with anywhere, perm on
// some prefix (session calls, which name no lock).
type need struct {
	perm     string
	name     string
	anywhere bool
}

// needOf returns what a request message needs. A message it does not know
// needs admin on every name: a call added without an entry here is closed,
// not open.
func needOf(msg any) need {
	switch m := msg.(type) {
	case *fencedv1.CreateSessionRequest, *fencedv1.KeepAliveRequest, *fencedv1.CloseSessionRequest:
		return need{perm: permAcquire, anywhere: true}
	case *fencedv1.AcquireRequest:
		return need{perm: permAcquire, name: m.Name}
	case *fencedv1.ReleaseRequest:
		return need{perm: permAcquire, name: m.Name}
	case *fencedv1.SemaphoreAcquireRequest:
		return need{perm: permAcquire, name: m.Name}
	case *fencedv1.SemaphoreReleaseRequest:
		return need{perm: permAcquire, name: m.Name}
	case *fencedv1.SemaphoreVerifyRequest:
		return need{perm: permRead, name: m.Name}
	case *fencedv1.SemaphoreDescribeRequest:
		return need{perm: permRead, name: m.Name}
	case *fencedv1.RenewRequest:
		return need{perm: permAcquire, name: m.Name}
	case *fencedv1.CampaignRequest:
		return need{perm: permAcquire, name: m.Name}
	case *fencedv1.ResignRequest:
		return need{perm: permAcquire, name: m.Name}
	case *fencedv1.ProclaimRequest:
		return need{perm: permAcquire, name: m.Name}
	case *fencedv1.LeaderRequest:
		return need{perm: permRead, name: m.Name}
	case *fencedv1.ObserveRequest:
		return need{perm: permRead, name: m.Name}
	case *fencedv1.VerifyRequest:
		return need{perm: permRead, name: m.Name}
	case *fencedv1.DescribeRequest:
		return need{perm: permRead, name: m.Name}
	case *fencedv1.ListRequest:
		// What the caller may not read is left out (readable).
		return need{perm: permRead, anywhere: true}
	case *fencedv1.StatusRequest:
		if m.Name == "" {
			return need{perm: permRead, anywhere: true}
		}
		return need{perm: permRead, name: m.Name}
	case *fencedv1.KVGetRequest:
		return need{perm: permRead, name: m.Key}
	case *fencedv1.KVPutRequest:
		return need{perm: permKVWrite, name: m.Key}
	case *fencedv1.KVDeleteRequest:
		return need{perm: permKVWrite, name: m.Key}
	case *fencedv1.RWAcquireRequest:
		return need{perm: permAcquire, name: m.Name}
	case *fencedv1.RWReleaseRequest:
		return need{perm: permAcquire, name: m.Name}
	case *fencedv1.RWVerifyRequest:
		return need{perm: permRead, name: m.Name}
	case *fencedv1.RWDescribeRequest:
		return need{perm: permRead, name: m.Name}
	case *fencedv1.QueuePushRequest:
		return need{perm: permEnqueue, name: m.Queue}
	case *fencedv1.QueuePushBatchRequest:
		return need{perm: permEnqueue, name: m.Queue}
	case *fencedv1.QueueClaimRequest:
		return need{perm: permAcquire, name: m.Queue}
	case *fencedv1.QueueAckBatchRequest:
		return need{perm: permAcquire, name: m.Queue}
	case *fencedv1.QueueAckRequest:
		return need{perm: permAcquire, name: m.Queue}
	case *fencedv1.QueueNackRequest:
		return need{perm: permAcquire, name: m.Queue}
	case *fencedv1.QueueExtendRequest:
		return need{perm: permAcquire, name: m.Queue}
	case *fencedv1.QueueStatsRequest:
		return need{perm: permRead, name: m.Queue}
	case *fencedv1.RevokeRequest:
		return need{perm: permAdmin, name: m.Name}
	case *fencedv1.ClusterStatusRequest:
		return need{perm: permRead}
	case *fencedv1.ListKeysRequest:
		return need{perm: permRead, anywhere: true}
	case *fencedv1.LineageRequest:
		return need{perm: permRead, anywhere: true}
	case *fencedv1.LatchCreateRequest:
		return need{perm: permAcquire, name: m.Name}
	case *fencedv1.LatchCountDownRequest:
		return need{perm: permAcquire, name: m.Name}
	case *fencedv1.LatchWaitRequest:
		return need{perm: permRead, name: m.Name}
	case *fencedv1.LatchJoinRequest:
		return need{perm: permRead, name: m.Name}
	case *fencedv1.LimiterConfigRequest:
		// Configuring sets everyone's rate: admin, like Revoke.
		return need{perm: permAdmin, name: m.Name}
	case *fencedv1.LimiterTakeRequest:
		return need{perm: permAcquire, name: m.Name}
	case *fencedv1.LimiterDescribeRequest:
		return need{perm: permRead, name: m.Name}
	default:
		// AddMember, RemoveMember, TransferLeader, RotateKeys, Save
		// (a snapshot) and anything unknown.
		return need{perm: permAdmin}
	}
}

// authorize checks that the caller of ctx may do what n needs. It returns
// nil without an auth file, and for calls made inside the server. A denial
// wraps fence.ErrPermissionDenied and is audited.
func (s *Server) authorize(ctx context.Context, procedure string, n need) error {
	if s.auth == nil {
		return nil
	}
	c := callerOf(ctx)
	if c == nil || c.id == nil {
		// The middleware lets only an uncredentialed RegisterNode through.
		err := fmt.Errorf("%w: %s needs a bearer token", fence.ErrPermissionDenied, procedure)
		s.audit.record(auditEntry{Event: auditDenied, Source: identityOf(ctx), Procedure: procedure, Target: n.name, Permission: n.perm, Outcome: "refused", Detail: err.Error()})
		return err
	}
	if n.anywhere && c.id.allowsAnywhere(n.perm) || !n.anywhere && c.id.allows(n.perm, n.name) {
		return nil
	}
	var err error
	switch {
	case n.anywhere:
		err = fmt.Errorf("%w: identity %q has no %q permission on any name (%s)", fence.ErrPermissionDenied, c.id.name, n.perm, procedure)
	case n.name == "":
		err = fmt.Errorf("%w: identity %q has no %q permission on every name: it needs a role granting %s with the prefix \"\" (%s)", fence.ErrPermissionDenied, c.id.name, n.perm, n.perm, procedure)
	default:
		err = fmt.Errorf("%w: identity %q has no %q permission on %q: it needs a role granting %s on a prefix of %q (the prefix \"\" covers every name) (%s)",
			fence.ErrPermissionDenied, c.id.name, n.perm, n.name, n.perm, n.name, procedure)
	}
	s.audit.record(auditEntry{Event: auditDenied, Identity: c.id.name, Source: identityOf(ctx), Procedure: procedure, Target: n.name, Permission: n.perm, Outcome: "refused", Detail: err.Error()})
	return err
}

// readable returns which names the caller of ctx may read, for the
// answers that list locks and sessions (Status, List) and the holder an
// Acquire that was not granted names: nil when every name (no auth file,
// a call made inside the server, or read on the prefix "").
func (s *Server) readable(ctx context.Context) func(name string) bool {
	if s.auth == nil {
		return nil
	}
	c := callerOf(ctx)
	switch {
	case c == nil:
		return nil
	case c.id == nil:
		return func(string) bool { return false }
	case c.id.allows(permRead, ""):
		return nil
	}
	return func(name string) bool { return c.id.allows(permRead, name) }
}

// authorizeRegister checks a RegisterNode: an identity with admin, or the
// member itself, known by its node certificate (API TLS with a CA) or,
// without TLS, by calling from the host of its peer address. Anything else
// could redirect the writes followers forward.
func (s *Server) authorizeRegister(ctx context.Context, peerAddr string, req *fencedv1.RegisterNodeRequest) error {
	if s.auth == nil {
		return nil
	}
	c := callerOf(ctx)
	if c != nil && c.id != nil {
		return s.authorize(ctx, registerNodePath, need{perm: permAdmin})
	}
	var ok bool
	switch {
	case c != nil && c.certName != "":
		ok = c.certName == req.Id
	case s.apiTLS == nil:
		members, _ := s.node.Members()
		for _, m := range members {
			host, _, err := net.SplitHostPort(m.Addr)
			ok = ok || m.ID == req.Id && err == nil && host == sourceOf(peerAddr)
		}
	}
	if ok {
		return nil
	}
	err := fmt.Errorf("%w: RegisterNode for %q is taken only from that member (its node certificate, or without TLS its peer host) or an identity with admin", fence.ErrPermissionDenied, req.Id)
	s.audit.record(auditEntry{Event: auditDenied, Source: identityOf(ctx), Procedure: registerNodePath, Target: req.Id, Permission: permAdmin, Outcome: "refused", Detail: err.Error()})
	return err
}

// authInterceptor authorizes every Connect call by needOf before its
// handler runs, and audits the admin actions with their outcome.
type authInterceptor struct{ s *Server }

func (a authInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		proc := req.Spec().Procedure
		msg := req.Any()
		if m, ok := msg.(proto.Message); ok {
			if err := refuseUnknown("the request", m); err != nil {
				return nil, toConnect(err)
			}
		}
		var err error
		if r, ok := msg.(*fencedv1.RegisterNodeRequest); ok {
			err = a.s.authorizeRegister(ctx, req.Peer().Addr, r)
		} else {
			err = a.s.authorize(ctx, proc, needOf(msg))
		}
		if err != nil {
			return nil, toConnect(err)
		}
		resp, err := next(ctx, req)
		if n := needOf(msg); n.perm == permAdmin {
			a.s.auditAdmin(ctx, proc, msg, err)
		}
		return resp, err
	}
}

func (a authInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler authorizes the KeepAlive stream when it opens (it
// renews sessions, which need acquire somewhere); the Pipeline's calls are
// authorized one by one (pipeline.run).
func (a authInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		proc := conn.Spec().Procedure
		if proc == fencedv1connect.SessionServiceKeepAliveProcedure {
			if err := a.s.authorize(ctx, proc, needOf(&fencedv1.KeepAliveRequest{})); err != nil {
				return toConnect(err)
			}
		}
		return next(ctx, conn)
	}
}

// auditAdmin records an admin action (or a RegisterNode) and its outcome.
func (s *Server) auditAdmin(ctx context.Context, proc string, msg any, err error) {
	e := auditEntry{Event: auditAdmin, Source: identityOf(ctx), Procedure: proc, Outcome: "ok"}
	if c := callerOf(ctx); c != nil && c.id != nil {
		e.Identity = c.id.name
	} else if c != nil && c.certName != "" {
		e.Identity = "certificate " + c.certName
	}
	switch m := msg.(type) {
	case *fencedv1.RevokeRequest:
		e.Target, e.Detail = m.Name, m.Reason
	case *fencedv1.AddMemberRequest:
		e.Target = m.Id
	case *fencedv1.RemoveMemberRequest:
		e.Target = m.Id
	case *fencedv1.TransferLeaderRequest:
		e.Target = m.Id
	case *fencedv1.RegisterNodeRequest:
		e.Target, e.Detail = m.Id, "api "+m.ApiAddr
	case *fencedv1.SaveSnapshotRequest:
		e.Target, e.Detail = "state", "snapshot save"
	case *fencedv1.RotateKeysRequest:
		e.Target, e.Detail = "signing keys", fmt.Sprintf("keep %d: %s", keepOf(m), m.Reason)
	}
	if err != nil {
		e.Outcome = "failed: " + connect.CodeOf(err).String()
		var ce *connect.Error
		if errors.As(err, &ce) {
			e.Detail = ce.Message()
		}
	}
	s.audit.record(e)
}
