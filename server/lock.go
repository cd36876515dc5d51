package server

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// cancelWaitTimeout bounds the proposal that takes a timed-out waiter out
// of its queue.
const cancelWaitTimeout = 10 * time.Second

// Page sizes of List (its limit field).
const (
	defaultListLimit = 1000
	maxListLimit     = 10000
)

// lockService implements the LockService API.
type lockService struct{ s *Server }

var _ fencedv1connect.LockServiceHandler = (*lockService)(nil)

func validateAcquire(m *fencedv1.AcquireRequest) error {
	return errors.Join(validateAcquireFields(m.Name, m.Session, m.WaitMs, m.TtlMs, m.RequestId), validateLockDelayMs(m.LockDelayMs))
}

// validateAcquireFields checks the fields every primitive's acquire
// request shares.
func validateAcquireFields(name string, session uint64, waitMs, ttlMs int64, requestID string) error {
	errs := []error{fence.ValidateName(name), fence.ValidateWaitMillis(waitMs), validateRequestID(requestID)}
	if session == 0 {
		if ttlMs == 0 {
			errs = append(errs, fmt.Errorf("%w: session is 0 and ttl_ms is 0; give a session, or a ttl_ms for a per-grant session", fence.ErrInvalidArgument))
		} else {
			errs = append(errs, fence.ValidateTTLMillis(ttlMs))
		}
	}
	return errors.Join(errs...)
}

// acquireSecret checks the secret of an acquire for session, or for
// session 0 (a per-grant session) admits the new session and makes its
// secret (secret, generated when empty). It returns the per-grant
// session's secret, to send back with its grant, and the hash the command
// carries.
func (s *Server) acquireSecret(ctx context.Context, session uint64, secret string) (string, []byte, error) {
	if session != 0 {
		hash, err := s.checkOwner(session, secret, false)
		return "", hash, err
	}
	if err := s.allowSession(ctx); err != nil {
		return "", nil, err
	}
	return newSessionSecret(secret)
}

// Acquire implements LockServiceHandler. A call with wait_ms > 0 that finds
// the lock held queues its session and blocks until the state machine
// grants it (the grant is pushed to this call), the wait runs out or the
// call ends. When the wait ends without a grant the waiter is taken out of
// the queue; if the grant won that race, the call returns it.
//
// A call that is cancelled, in flight or while it waits, may leave its
// session holding the lock if the grant was applied at that moment; the
// caller learns of it by retrying with the same seq, or withdraws the
// acquire with a Release whose withdraw_seq is the acquire's seq (the SDK
// does): that undoes the acquire whether it was applied before or after
// the release.
func (h *lockService) Acquire(ctx context.Context, req *connect.Request[fencedv1.AcquireRequest]) (*connect.Response[fencedv1.AcquireResponse], error) {
	resp, err := h.acquireMsg(ctx, req.Msg)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(resp), nil
}

// acquireMsg is Acquire on the messages, without Connect's envelopes
// (the Pipeline calls it directly).
func (h *lockService) acquireMsg(ctx context.Context, m *fencedv1.AcquireRequest) (*fencedv1.AcquireResponse, error) {
	if err := validateAcquire(m); err != nil {
		return nil, toConnect(err)
	}
	secret, hash, err := h.s.acquireSecret(ctx, m.Session, m.Secret)
	if err != nil {
		return nil, toConnect(err)
	}
	res, grant, err := h.s.acquire(ctx, m.Name, &statev1.Command{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{
		Session: m.Session, Seq: m.Seq, Name: m.Name, Wait: m.WaitMs > 0, TtlMs: m.TtlMs, RequestId: m.RequestId, Quota: h.s.quota(ctx), SecretHash: hash,
		LockDelayMs: h.s.lockDelayMs(m.LockDelayMs),
	}}}, func(session uint64) (fsm.Result, error) {
		return h.s.wait(ctx, m.Name, session, time.Duration(m.WaitMs)*time.Millisecond)
	})
	if err != nil {
		return nil, toConnect(err)
	}
	resp := &fencedv1.AcquireResponse{Granted: res.Granted, Holder: res.Holder, Delayed: res.Delayed, Grant: grant}
	if res.Granted {
		resp.Secret = secret // the per-grant session's, when session was 0
	}
	return resp, nil
}

// acquire proposes cmd, an acquire of any primitive on name, and when it
// queued its session waits for the outcome with wait. It returns the
// result, whose Holder (a session id) is shown only to a caller who may
// read name, and, when granted, the grant as handed to its holder
// (handOut: signed with Config.SignGrants).
func (s *Server) acquire(ctx context.Context, name string, cmd *statev1.Command, wait func(session uint64) (fsm.Result, error)) (fsm.Result, *fencedv1.Grant, error) {
	start := time.Now()
	res, err := s.propose(ctx, cmd)
	if err != nil {
		return fsm.Result{}, nil, s.limitErr(err)
	}
	if res.Queued {
		if res, err = wait(res.Session); err != nil {
			return fsm.Result{}, nil, err
		}
	}
	if visible := s.readable(ctx); visible != nil && !visible(name) {
		res.Holder = 0 // a session id, shown only to readers of the name
	}
	if !res.Granted {
		return res, nil, nil
	}
	s.metrics.prefix.waited(res.Grant, time.Since(start))
	return res, s.handOut(s.faults.reported(res.Grant)), nil
}

// wait blocks until the queued session is granted lock name, leaves the
// queue, or wait passes.
func (s *Server) wait(ctx context.Context, name string, session uint64, wait time.Duration) (fsm.Result, error) {
	look := func(m *fsm.Machine) waitState {
		info := m.Lock(name)
		st := waitState{holder: info.Holder.Session, granted: info.Holder.Session == session, grant: info.Holder}
		for _, w := range info.Waiters {
			st.queued = st.queued || w == session
		}
		return st
	}
	cancel := &statev1.Command{Op: &statev1.Command_CancelWait{CancelWait: &statev1.CancelWait{Session: session, Name: name}}}
	return s.await(ctx, waitKey{fence.KindLock, name, session}, wait, look, cancel)
}

// Release implements LockServiceHandler. With withdraw_seq set it undoes
// only that acquire of the session, or with session 0 and a request_id the
// per-grant acquire made with them, whether the acquire is applied before
// or after it.
func (h *lockService) Release(ctx context.Context, req *connect.Request[fencedv1.ReleaseRequest]) (*connect.Response[fencedv1.ReleaseResponse], error) {
	resp, err := h.releaseMsg(ctx, req.Msg)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(resp), nil
}

// releaseMsg is Release on the messages, without Connect's envelopes
// (the Pipeline calls it directly).
func (h *lockService) releaseMsg(ctx context.Context, m *fencedv1.ReleaseRequest) (*fencedv1.ReleaseResponse, error) {
	res, err := h.s.release(ctx, m.Name, m.Session, m.Secret, m.RequestId, func(hash []byte, q *statev1.Quota) *statev1.Command {
		return &statev1.Command{Op: &statev1.Command_Release{Release: &statev1.Release{Session: m.Session, Seq: m.Seq, Name: m.Name,
			WithdrawSeq: m.WithdrawSeq, RequestId: m.RequestId, TtlMs: m.TtlMs, Quota: q, SecretHash: hash}}}
	})
	if err != nil {
		return nil, toConnect(err)
	}
	return &fencedv1.ReleaseResponse{Result: releaseProto(res)}, nil
}

// release validates and proposes a release of any primitive: name, and
// session with its secret (a session that no longer exists is let through:
// the release then changes nothing), with request_id for a per-grant
// withdrawal; cmd builds the command from the secret's hash and the
// caller's quota.
func (s *Server) release(ctx context.Context, name string, session uint64, secret, requestID string, cmd func(hash []byte, q *statev1.Quota) *statev1.Command) (fsm.ReleaseResult, error) {
	if err := errors.Join(fence.ValidateName(name), validateRequestID(requestID)); err != nil {
		return 0, err
	}
	hash, err := s.checkOwner(session, secret, true)
	if err != nil {
		return 0, err
	}
	res, err := s.propose(ctx, cmd(hash, s.quota(ctx)))
	if err != nil {
		return 0, s.limitErr(err)
	}
	return res.Release, nil
}

// Verify implements LockServiceHandler.
func (h *lockService) Verify(ctx context.Context, req *connect.Request[fencedv1.VerifyRequest]) (*connect.Response[fencedv1.VerifyResponse], error) {
	m := req.Msg
	if err := fence.ValidateName(m.Name); err != nil {
		return nil, toConnect(err)
	}
	if err := fence.ValidateToken(fence.Token(m.Token)); err != nil {
		return nil, toConnect(err)
	}
	var info fsm.LockInfo
	h.s.sm.read(func(fm *fsm.Machine) { info = fm.Lock(m.Name) })
	return connect.NewResponse(&fencedv1.VerifyResponse{
		Current: info.Held() && info.Holder.Token == fence.Token(m.Token),
		Holder:  grantProto(info.Holder),
	}), nil
}

// Describe implements LockServiceHandler: the lock with a page of its
// waiters.
func (h *lockService) Describe(ctx context.Context, req *connect.Request[fencedv1.DescribeRequest]) (*connect.Response[fencedv1.DescribeResponse], error) {
	m := req.Msg
	page, err := parseWaiterPage(m.Name, m.PageSize, m.PageToken)
	if err != nil {
		return nil, toConnect(err)
	}
	var info fsm.LockInfo
	h.s.sm.read(func(fm *fsm.Machine) { info = fm.Lock(m.Name) })
	total := len(info.Waiters)
	var next string
	info.Waiters, next = pageOf(page, info.Waiters)
	resp := &fencedv1.DescribeResponse{Lock: lockProto(info), NextPageToken: next}
	resp.Lock.WaiterCount = uint32(total)
	return connect.NewResponse(resp), nil
}

// waiterPage is a page of a Describe's waiters: size of them from offset.
type waiterPage struct{ offset, size int }

// parseWaiterPage checks a Describe's name and reads its page_size and
// page_token.
func parseWaiterPage(name string, pageSizeField int32, token string) (waiterPage, error) {
	if err := fence.ValidateName(name); err != nil {
		return waiterPage{}, err
	}
	size, err := pageSize("page_size", pageSizeField, defaultPageSize, maxPageSize)
	if err != nil {
		return waiterPage{}, err
	}
	_, pos, err := decodeCursor(token, string(rune(cursorWaiter)))
	if err != nil {
		return waiterPage{}, err
	}
	offset := 0
	if pos != "" {
		if offset, err = strconv.Atoi(pos); err != nil || offset < 0 {
			return waiterPage{}, fmt.Errorf("%w: page_token %q is not a page token of this call", fence.ErrInvalidArgument, token)
		}
	}
	return waiterPage{offset: offset, size: size}, nil
}

// pageOf cuts p out of all, with the token of the next page ("" at the
// end).
func pageOf[T any](p waiterPage, all []T) ([]T, string) {
	total := len(all)
	var next string
	if p.offset+p.size < total {
		next = encodeCursor(cursorWaiter, strconv.Itoa(p.offset+p.size))
	}
	return all[min(p.offset, total):min(p.offset+p.size, total)], next
}

// List implements LockServiceHandler: a page of the locks whose names
// start with the prefix.
func (h *lockService) List(ctx context.Context, req *connect.Request[fencedv1.ListRequest]) (*connect.Response[fencedv1.ListResponse], error) {
	m := req.Msg
	if len(m.Prefix) > fence.MaxNameLen {
		return nil, toConnect(fmt.Errorf("%w: prefix is %d bytes, longer than %d", fence.ErrInvalidArgument, len(m.Prefix), fence.MaxNameLen))
	}
	limit, err := pageSize("limit", m.Limit, defaultListLimit, maxListLimit)
	if err != nil {
		return nil, toConnect(err)
	}
	_, after, err := decodeCursor(m.PageToken, string(rune(cursorLock)))
	if err != nil {
		return nil, toConnect(err)
	}
	var locks []fsm.LockInfo
	var more bool
	var hidden int
	visible := h.s.readable(ctx)
	h.s.sm.read(func(fm *fsm.Machine) { locks, hidden, more = fm.LocksVisible(m.Prefix, after, visible, limit) })
	resp := &fencedv1.ListResponse{HiddenLocks: uint32(hidden)}
	for _, l := range locks {
		resp.Locks = append(resp.Locks, inlineLock(l))
	}
	if more {
		resp.NextPageToken = encodeCursor(cursorLock, locks[len(locks)-1].Name)
	}
	return connect.NewResponse(resp), nil
}

// Status implements LockServiceHandler: the node's view and a page of the
// locks, then the sessions.
func (h *lockService) Status(ctx context.Context, req *connect.Request[fencedv1.StatusRequest]) (*connect.Response[fencedv1.StatusResponse], error) {
	m := req.Msg
	if m.Name != "" {
		if err := fence.ValidateName(m.Name); err != nil {
			return nil, toConnect(err)
		}
	}
	size, err := pageSize("page_size", m.PageSize, defaultPageSize, maxPageSize)
	if err != nil {
		return nil, toConnect(err)
	}
	st := h.s.node.Stats()
	resp := &fencedv1.StatusResponse{NodeId: st.NodeID, Leader: st.LeaderID, Term: st.Term}
	h.s.sm.read(func(fm *fsm.Machine) {
		resp.Issuer, resp.LastToken = fm.Issuer(), uint64(fm.LastToken())
		err = statusPage(fm, resp, m.Name, m.PageToken, size, h.s.readable(ctx))
	})
	if err != nil {
		return nil, toConnect(err)
	}
	resp.AppliedIndex = h.s.sm.appliedIndex()
	return connect.NewResponse(resp), nil
}
