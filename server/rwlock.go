package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// rwLockService implements the RWLockService API: the fair read/write
// lock of fsm/rwlock.go.
type rwLockService struct{ s *Server }

var _ fencedv1connect.RWLockServiceHandler = (*rwLockService)(nil)

// rwMode converts the API's mode; any other value than read or write is
// refused.
func rwMode(mode fencedv1.RWLockMode) (statev1.RWMode, fence.Kind, error) {
	switch mode {
	case fencedv1.RWLockMode_RW_LOCK_MODE_READ:
		return statev1.RWMode_RW_MODE_READ, fence.KindRead, nil
	case fencedv1.RWLockMode_RW_LOCK_MODE_WRITE:
		return statev1.RWMode_RW_MODE_WRITE, fence.KindWrite, nil
	}
	return 0, "", fmt.Errorf("%w: mode %d is neither read (1) nor write (2)", fence.ErrInvalidArgument, int32(mode))
}

// Acquire implements RWLockServiceHandler. A call with wait_ms > 0 that
// cannot be admitted queues its session and blocks until the grant is
// pushed to it, the wait runs out or the call ends, as LockService.Acquire
// does; the same uncertainty of a cancelled call applies, and the same
// withdrawal undoes it.
func (h *rwLockService) Acquire(ctx context.Context, req *connect.Request[fencedv1.RWAcquireRequest]) (*connect.Response[fencedv1.RWAcquireResponse], error) {
	m := req.Msg
	mode, kind, merr := rwMode(m.Mode)
	if err := errors.Join(validateAcquireFields(m.Name, m.Session, m.WaitMs, m.TtlMs, m.RequestId), merr); err != nil {
		return nil, toConnect(err)
	}
	secret, hash, err := h.s.acquireSecret(ctx, m.Session, m.Secret)
	if err != nil {
		return nil, toConnect(err)
	}
	res, grant, err := h.s.acquire(ctx, m.Name, &statev1.Command{Op: &statev1.Command_RwAcquire{RwAcquire: &statev1.RWAcquire{
		Session: m.Session, Seq: m.Seq, Name: m.Name, Mode: mode, Wait: m.WaitMs > 0, TtlMs: m.TtlMs, RequestId: m.RequestId, Quota: h.s.quota(ctx), SecretHash: hash,
	}}}, func(session uint64) (fsm.Result, error) {
		return h.s.rwWait(ctx, kind, m.Name, session, time.Duration(m.WaitMs)*time.Millisecond)
	})
	if err != nil {
		return nil, toConnect(err)
	}
	resp := &fencedv1.RWAcquireResponse{Granted: res.Granted, Holder: res.Holder, Grant: grant}
	if res.Granted {
		resp.Secret = secret // the per-grant session's, when session was 0
	}
	return connect.NewResponse(resp), nil
}

// rwWait blocks until the queued session is granted read/write lock name
// (a grant of kind), leaves the queue, or wait passes.
func (s *Server) rwWait(ctx context.Context, kind fence.Kind, name string, session uint64, wait time.Duration) (fsm.Result, error) {
	look := func(m *fsm.Machine) waitState {
		info := m.RWLock(name)
		var st waitState
		for _, g := range append(info.Readers, info.Writer) {
			if g.Token != 0 && st.holder == 0 {
				st.holder = g.Session
			}
			if g.Token != 0 && g.Session == session {
				st.granted, st.grant = true, g
			}
		}
		for _, w := range info.Waiters {
			st.queued = st.queued || w.Session == session
		}
		return st
	}
	cancel := &statev1.Command{Op: &statev1.Command_RwCancelWait{RwCancelWait: &statev1.RWCancelWait{Session: session, Name: name}}}
	return s.await(ctx, waitKey{kind, name, session}, wait, look, cancel)
}

// Release implements RWLockServiceHandler, as LockService.Release.
func (h *rwLockService) Release(ctx context.Context, req *connect.Request[fencedv1.RWReleaseRequest]) (*connect.Response[fencedv1.RWReleaseResponse], error) {
	m := req.Msg
	res, err := h.s.release(ctx, m.Name, m.Session, m.Secret, m.RequestId, func(hash []byte, q *statev1.Quota) *statev1.Command {
		return &statev1.Command{Op: &statev1.Command_RwRelease{RwRelease: &statev1.RWRelease{Session: m.Session, Seq: m.Seq, Name: m.Name,
			WithdrawSeq: m.WithdrawSeq, RequestId: m.RequestId, TtlMs: m.TtlMs, Quota: q, SecretHash: hash}}}
	})
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&fencedv1.RWReleaseResponse{Result: releaseProto(res)}), nil
}

// Verify implements RWLockServiceHandler.
func (h *rwLockService) Verify(ctx context.Context, req *connect.Request[fencedv1.RWVerifyRequest]) (*connect.Response[fencedv1.RWVerifyResponse], error) {
	m := req.Msg
	if err := errors.Join(fence.ValidateName(m.Name), fence.ValidateToken(fence.Token(m.Token))); err != nil {
		return nil, toConnect(err)
	}
	var info fsm.RWLockInfo
	h.s.sm.read(func(fm *fsm.Machine) { info = fm.RWLock(m.Name) })
	resp := &fencedv1.RWVerifyResponse{}
	for _, g := range append(info.Readers, info.Writer) {
		if g.Token != 0 && g.Token == fence.Token(m.Token) {
			resp.Current, resp.Grant = true, grantProto(g)
		}
	}
	return connect.NewResponse(resp), nil
}

// Describe implements RWLockServiceHandler: the readers, the writer and a
// page of the waiters.
func (h *rwLockService) Describe(ctx context.Context, req *connect.Request[fencedv1.RWDescribeRequest]) (*connect.Response[fencedv1.RWDescribeResponse], error) {
	m := req.Msg
	page, err := parseWaiterPage(m.Name, m.PageSize, m.PageToken)
	if err != nil {
		return nil, toConnect(err)
	}
	var info fsm.RWLockInfo
	h.s.sm.read(func(fm *fsm.Machine) { info = fm.RWLock(m.Name) })
	total := len(info.Waiters)
	waiters, next := pageOf(page, info.Waiters)
	out := &fencedv1.RWLockInfo{Name: info.Name, Writer: grantProto(info.Writer), WaiterCount: uint32(total)}
	for _, g := range info.Readers {
		out.Readers = append(out.Readers, grantProto(g))
	}
	for _, w := range waiters {
		mode := fencedv1.RWLockMode_RW_LOCK_MODE_READ
		if w.Write {
			mode = fencedv1.RWLockMode_RW_LOCK_MODE_WRITE
		}
		out.Waiters = append(out.Waiters, &fencedv1.RWWaiter{Session: w.Session, Mode: mode})
	}
	return connect.NewResponse(&fencedv1.RWDescribeResponse{Lock: out, NextPageToken: next}), nil
}
