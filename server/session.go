package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// maxRequestIDLen bounds request ids (kept in the replicated state).
const maxRequestIDLen = 64

// sessionService implements the SessionService API.
type sessionService struct{ s *Server }

var _ fencedv1connect.SessionServiceHandler = (*sessionService)(nil)

func validateRequestID(id string) error {
	if len(id) > maxRequestIDLen {
		return fmt.Errorf("%w: request_id is %d bytes, longer than %d", fence.ErrInvalidArgument, len(id), maxRequestIDLen)
	}
	return nil
}

// CreateSession implements SessionServiceHandler.
func (h *sessionService) CreateSession(ctx context.Context, req *connect.Request[fencedv1.CreateSessionRequest]) (*connect.Response[fencedv1.CreateSessionResponse], error) {
	m := req.Msg
	secret, hash, secretErr := newSessionSecret(m.Secret)
	if err := errors.Join(fence.ValidateTTLMillis(m.TtlMs), validateRequestID(m.RequestId), secretErr); err != nil {
		return nil, toConnect(err)
	}
	if err := h.s.allowSession(ctx); err != nil {
		return nil, toConnect(err)
	}
	res, err := h.s.propose(ctx, &statev1.Command{Op: &statev1.Command_CreateSession{CreateSession: &statev1.CreateSession{TtlMs: m.TtlMs, RequestId: m.RequestId, Quota: h.s.quota(ctx), SecretHash: hash}}})
	if err != nil {
		return nil, toConnect(h.s.limitErr(err))
	}
	var issuer string
	h.s.sm.read(func(fm *fsm.Machine) { issuer = fm.Issuer() })
	return connect.NewResponse(&fencedv1.CreateSessionResponse{Session: res.Session, TtlMs: m.TtlMs, Issuer: issuer, Secret: secret}), nil
}

// renewVerifyTimeout bounds the leadership check behind a renewal.
const renewVerifyTimeout = 2 * time.Second

// renew renews sessions' leases on this leader, one answer per request
// in order. The renewals are confirmed only after the leader has
// confirmed its leadership with a quorum *after* the requests arrived: any
// later leader takes over after that point and restarts each session's
// full TTL from its takeover, so the client, which measures from before it
// sent the request, gives up first (when the two clocks run at about the
// same rate; this is a liveness signal for the holder, not a safety
// guarantee). One check confirms every renewal that arrived before it
// started, which is how a stream carrying many sessions costs one quorum
// round per batch rather than per session. The check is
// raftstore's ConfirmLeader, which does not wait behind the state machine:
// a slow apply or a snapshot's encoding does not hold renewals up (with
// raft's VerifyLeader it did, until its timeout ended the stream).
//
// A deposed leader that has not noticed yet (it was paused, or cut off)
// fails the check and confirms nothing.
//
// A renewal without the session's secret renews nothing and is answered
// with not_owner. push, when not nil, is subscribed to the revocation of
// every session renewed (the expiry table keeps its number), before the
// leadership check, so a revocation applied while the check runs is
// pushed after the answer.
func (s *Server) renew(ctx context.Context, reqs []renewal, push *pushStream) ([]*fencedv1.KeepAliveResponse, error) {
	if s.serving.Load() == 0 {
		return nil, toConnect(fmt.Errorf("%w: node %s is not a serving leader; send keep-alives to the leader", fence.ErrNotLeader, s.cfg.Raft.NodeID))
	}
	owner := s.checkRenewals(reqs)
	resps := make([]*fencedv1.KeepAliveResponse, len(reqs))
	renewed := 0
	for i, req := range reqs {
		resp := &fencedv1.KeepAliveResponse{Session: req.session, Nonce: req.nonce}
		resps[i] = resp
		if errors.Is(owner[i], fence.ErrNotOwner) || errors.Is(owner[i], fence.ErrInvalidArgument) {
			resp.NotOwner, resp.Error = true, owner[i].Error()
			continue
		}
		ttl, ok := s.expiry.renew(req.session, push.number())
		if !ok {
			s.metrics.staleSession.Inc()
			resp.Gone = true
			resp.Error = fmt.Sprintf("session %d does not exist or is expiring; create a new session", req.session)
			continue
		}
		resp.TtlMs = ttl.Milliseconds()
		renewed++
	}
	if renewed > 0 {
		vctx, cancel := context.WithTimeout(ctx, renewVerifyTimeout)
		defer cancel()
		if err := s.node.ConfirmLeader(vctx); err != nil {
			return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("renewal not confirmed: %w", err))
		}
		s.metrics.sessionRenewals.Add(float64(renewed))
	}
	return resps, nil
}

// checkRenewals checks the secret of every renewal, under one read of the
// state: nil, or an error wrapping fence.ErrNotOwner,
// fence.ErrInvalidArgument or fence.ErrSessionNotFound.
func (s *Server) checkRenewals(reqs []renewal) []error {
	secrets := make([]presented, len(reqs))
	for i, req := range reqs {
		secrets[i] = present(req.secret)
	}
	errs := make([]error, len(reqs))
	s.sm.read(func(m *fsm.Machine) {
		for i, req := range reqs {
			errs[i] = secrets[i].check(m, req.session)
		}
	})
	return errs
}

// KeepAlive implements SessionServiceHandler. One goroutine receives the
// renewals; this one renews all those received so far (one leadership
// check for all of them) and answers them in one message, while the next
// ones queue. The stream ends with Unavailable when this node stops being
// the leader, so the client moves to another endpoint. When a session this
// stream renewed is revoked, the stream is told at once, with an answer of
// nonce 0 (revokePush).
func (h *sessionService) KeepAlive(ctx context.Context, stream *connect.BidiStream[fencedv1.KeepAliveRequest, fencedv1.KeepAliveResponse]) error {
	return h.keepAlive(ctx, stream)
}

// keepAlive serves one KeepAlive stream (see KeepAlive), authorized when
// it opened.
func (h *sessionService) keepAlive(ctx context.Context, stream bidiStream[fencedv1.KeepAliveRequest, fencedv1.KeepAliveResponse]) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	push := h.s.revokes.stream()
	defer push.done()
	var (
		mu      sync.Mutex
		queued  []renewal
		recvErr error
		ended   bool
		ready   = make(chan struct{}, 1)
	)
	go func() {
		defer func() {
			select {
			case ready <- struct{}{}:
			default:
			}
		}()
		for {
			req, err := stream.Receive()
			if err == nil {
				err = toConnect(refuseUnknown("the KeepAlive message", req))
			}
			mu.Lock()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					recvErr = err
				}
				ended = true
				mu.Unlock()
				return
			}
			queued = queueRenewals(queued, req)
			mu.Unlock()
			select {
			case ready <- struct{}{}:
			default:
			}
		}
	}()
	for {
		select {
		case <-ready:
		case <-push.signal:
		case <-ctx.Done():
			return nil
		}
		if err := sendAnswers(stream, push.take()); err != nil {
			return err
		}
		mu.Lock()
		batch, done, err := queued, ended, recvErr
		queued = nil
		mu.Unlock()
		for len(batch) > 0 {
			n := min(len(batch), maxRenewalsPerAnswer)
			resps, err := h.s.renew(ctx, batch[:n], push)
			if err != nil {
				return err
			}
			batch = batch[n:]
			if err := sendAnswers(stream, resps); err != nil {
				return err
			}
		}
		if done {
			return err
		}
	}
}

// sendAnswers sends answers in messages of up to maxRenewalsPerAnswer, the
// first of each carrying the others in its "more".
func sendAnswers(stream bidiStream[fencedv1.KeepAliveRequest, fencedv1.KeepAliveResponse], resps []*fencedv1.KeepAliveResponse) error {
	for len(resps) > 0 {
		n := min(len(resps), maxRenewalsPerAnswer)
		out := resps[0]
		out.More = resps[1:n]
		resps = resps[n:]
		if err := stream.Send(out); err != nil {
			return err
		}
	}
	return nil
}

// maxRenewalsPerAnswer bounds the answers packed into one message, to keep
// it well below any message size limit (each answer is under 40 bytes).
const maxRenewalsPerAnswer = 1000

// KeepAliveOnce implements SessionServiceHandler.
func (h *sessionService) KeepAliveOnce(ctx context.Context, req *connect.Request[fencedv1.KeepAliveRequest]) (*connect.Response[fencedv1.KeepAliveResponse], error) {
	if len(req.Msg.More) > 0 {
		return nil, toConnect(fmt.Errorf("%w: KeepAliveOnce renews one session; send more on the KeepAlive stream", fence.ErrInvalidArgument))
	}
	if _, err := h.s.checkOwner(req.Msg.Session, req.Msg.Secret, true); err != nil {
		return nil, toConnect(err)
	}
	resps, err := h.s.renew(ctx, []renewal{renewalOf(req.Msg)}, nil)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(resps[0]), nil
}

// CloseSession implements SessionServiceHandler.
func (h *sessionService) CloseSession(ctx context.Context, req *connect.Request[fencedv1.CloseSessionRequest]) (*connect.Response[fencedv1.CloseSessionResponse], error) {
	hash, err := h.s.checkOwner(req.Msg.Session, req.Msg.Secret, true)
	if err != nil {
		return nil, toConnect(err)
	}
	res, err := h.s.propose(ctx, &statev1.Command{Op: &statev1.Command_CloseSession{CloseSession: &statev1.CloseSession{Session: req.Msg.Session, SecretHash: hash}}})
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&fencedv1.CloseSessionResponse{Closed: res.Ended}), nil
}
