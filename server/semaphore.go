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

// describeMax caps the holders and the waiters a semaphore's Describe
// returns (each).
const describeMax = 1000

// semaphoreService implements the SemaphoreService API.
type semaphoreService struct{ s *Server }

var _ fencedv1connect.SemaphoreServiceHandler = (*semaphoreService)(nil)

// semPermits is the number of permits a request asks for: 0 means 1.
func semPermits(m *fencedv1.SemaphoreAcquireRequest) uint32 { return max(m.Permits, 1) }

func validateSemAcquire(m *fencedv1.SemaphoreAcquireRequest) error {
	errs := []error{fence.ValidateName(m.Name), fence.ValidateWaitMillis(m.WaitMs), validateRequestID(m.RequestId)}
	if err := fsm.ValidateCapacity(m.Capacity); err != nil {
		errs = append(errs, err)
	} else {
		errs = append(errs, fsm.ValidatePermits(semPermits(m), m.Capacity))
	}
	if m.Session == 0 {
		if m.TtlMs == 0 {
			errs = append(errs, fmt.Errorf("%w: session is 0 and ttl_ms is 0; give a session, or a ttl_ms for a per-grant session", fence.ErrInvalidArgument))
		} else {
			errs = append(errs, fence.ValidateTTLMillis(m.TtlMs))
		}
	}
	return errors.Join(errs...)
}

// Acquire implements SemaphoreServiceHandler, as LockService.Acquire does
// for a lock: a call with wait_ms > 0 that finds too few permits free (or
// others waiting before it) queues its session and blocks until the state
// machine grants it, the wait runs out or the call ends; a call cancelled
// meanwhile may leave its session holding the permits, which the caller
// learns by retrying with the same seq, or undoes with a Release whose
// withdraw_seq is the acquire's seq.
func (h *semaphoreService) Acquire(ctx context.Context, req *connect.Request[fencedv1.SemaphoreAcquireRequest]) (*connect.Response[fencedv1.SemaphoreAcquireResponse], error) {
	m := req.Msg
	if err := validateSemAcquire(m); err != nil {
		return nil, toConnect(err)
	}
	var secret string
	var hash []byte
	var err error
	if m.Session == 0 {
		if err := h.s.allowSession(ctx); err != nil {
			return nil, toConnect(err)
		}
		secret, hash, err = newSessionSecret(m.Secret)
	} else {
		hash, err = h.s.checkOwner(m.Session, m.Secret, false)
	}
	if err != nil {
		return nil, toConnect(err)
	}
	res, err := h.s.propose(ctx, &statev1.Command{Op: &statev1.Command_SemAcquire{SemAcquire: &statev1.SemAcquire{
		Session: m.Session, Seq: m.Seq, Name: m.Name, Capacity: m.Capacity, Permits: semPermits(m), Wait: m.WaitMs > 0,
		TtlMs: m.TtlMs, RequestId: m.RequestId, Quota: h.s.quota(ctx), SecretHash: hash,
	}}})
	if err != nil {
		return nil, toConnect(h.s.limitErr(err))
	}
	if res.Queued {
		res, err = h.s.waitPermits(ctx, m.Name, res.Session, time.Duration(m.WaitMs)*time.Millisecond)
		if err != nil {
			return nil, toConnect(err)
		}
	}
	resp := &fencedv1.SemaphoreAcquireResponse{Granted: res.Granted, Available: res.Available, Capacity: res.Capacity}
	if res.Granted {
		resp.Permits = h.s.permitsProto(res.Permits)
		resp.Secret = secret // the per-grant session's, when session was 0
	}
	return connect.NewResponse(resp), nil
}

// waitPermits blocks until the queued session is granted its permits of
// semaphore name, leaves the queue, or wait passes (Server.await), and
// returns all the permits it was granted.
func (s *Server) waitPermits(ctx context.Context, name string, session uint64, wait time.Duration) (fsm.Result, error) {
	look := func(m *fsm.Machine) waitState {
		ps, queued := m.SemaphoreHolding(name, session)
		st := waitState{queued: queued}
		if len(ps) > 0 {
			st.granted, st.grant = true, ps[0].Grant
		}
		return st
	}
	cancel := &statev1.Command{Op: &statev1.Command_SemCancelWait{SemCancelWait: &statev1.SemCancelWait{Session: session, Name: name}}}
	res, err := s.await(ctx, waitKey{fence.KindPermit, name, session}, wait, look, cancel)
	if err != nil || res.Permits != nil {
		return res, err
	}
	// The push named the first permit; read them all, and what is free.
	s.sm.read(func(m *fsm.Machine) {
		info := m.Semaphore(name)
		res.Capacity, res.Available = info.Capacity, info.Capacity-uint32(len(info.Permits))
		if res.Granted {
			res.Permits, _ = m.SemaphoreHolding(name, session)
		}
	})
	if res.Granted && len(res.Permits) == 0 {
		return fsm.Result{}, fmt.Errorf("%w: the permits of %q granted to session %d ended before the reply", fence.ErrLockLost, name, session)
	}
	return res, nil
}

// Release implements SemaphoreServiceHandler: it releases every permit
// the session holds of the semaphore, or, with withdraw_seq, undoes only
// that acquire, as LockService.Release does.
func (h *semaphoreService) Release(ctx context.Context, req *connect.Request[fencedv1.SemaphoreReleaseRequest]) (*connect.Response[fencedv1.SemaphoreReleaseResponse], error) {
	m := req.Msg
	if err := errors.Join(fence.ValidateName(m.Name), validateRequestID(m.RequestId)); err != nil {
		return nil, toConnect(err)
	}
	hash, err := h.s.checkOwner(m.Session, m.Secret, true)
	if err != nil {
		return nil, toConnect(err)
	}
	res, err := h.s.propose(ctx, &statev1.Command{Op: &statev1.Command_SemRelease{SemRelease: &statev1.SemRelease{Session: m.Session, Seq: m.Seq, Name: m.Name,
		WithdrawSeq: m.WithdrawSeq, RequestId: m.RequestId, TtlMs: m.TtlMs, Quota: h.s.quota(ctx), SecretHash: hash}}})
	if err != nil {
		return nil, toConnect(h.s.limitErr(err))
	}
	return connect.NewResponse(&fencedv1.SemaphoreReleaseResponse{Result: releaseProto(res.Release)}), nil
}

// Verify implements SemaphoreServiceHandler.
func (h *semaphoreService) Verify(ctx context.Context, req *connect.Request[fencedv1.SemaphoreVerifyRequest]) (*connect.Response[fencedv1.SemaphoreVerifyResponse], error) {
	m := req.Msg
	if err := errors.Join(fence.ValidateName(m.Name), fence.ValidateToken(fence.Token(m.Token))); err != nil {
		return nil, toConnect(err)
	}
	var info fsm.SemaphoreInfo
	h.s.sm.read(func(fm *fsm.Machine) { info = fm.Semaphore(m.Name) })
	resp := &fencedv1.SemaphoreVerifyResponse{}
	for _, p := range info.Permits {
		if p.Slot == m.Slot {
			resp.Holder = permitProto(p)
			resp.Current = p.Grant.Token == fence.Token(m.Token)
		}
	}
	return connect.NewResponse(resp), nil
}

// Describe implements SemaphoreServiceHandler: the capacity, the first
// describeMax permits and waiters, and how many there are.
func (h *semaphoreService) Describe(ctx context.Context, req *connect.Request[fencedv1.SemaphoreDescribeRequest]) (*connect.Response[fencedv1.SemaphoreDescribeResponse], error) {
	m := req.Msg
	if err := fence.ValidateName(m.Name); err != nil {
		return nil, toConnect(err)
	}
	var info fsm.SemaphoreInfo
	h.s.sm.read(func(fm *fsm.Machine) { info = fm.Semaphore(m.Name) })
	resp := &fencedv1.SemaphoreDescribeResponse{Name: info.Name, Capacity: info.Capacity,
		Held: uint32(len(info.Permits)), WaiterCount: uint32(len(info.Waiters))}
	resp.Holders = h.s.permitsProto(info.Permits[:min(len(info.Permits), describeMax)])
	for _, w := range info.Waiters[:min(len(info.Waiters), describeMax)] {
		resp.Waiters = append(resp.Waiters, &fencedv1.SemaphoreWaiter{Session: w.Session, Permits: w.Permits})
	}
	return connect.NewResponse(resp), nil
}

func permitProto(p fsm.Permit) *fencedv1.Permit {
	return &fencedv1.Permit{Slot: p.Slot, Grant: grantProto(p.Grant)}
}

// permitsProto converts permits for a reply, as the server's test faults
// report them.
func (s *Server) permitsProto(ps []fsm.Permit) []*fencedv1.Permit {
	out := make([]*fencedv1.Permit, 0, len(ps))
	for _, p := range ps {
		p.Grant = s.faults.reported(p.Grant)
		out = append(out, permitProto(p))
	}
	return out
}
