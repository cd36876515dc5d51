package server

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// latchWait is the kind of the wait keys of latch waits: a latch issues
// no grant, so its waits are keyed by (latchWait, name, generation) in the
// shared waits table, apart from every grant's.
const latchWait fence.Kind = "latch"

// latchService implements the LatchService API.
type latchService struct{ s *Server }

var _ fencedv1connect.LatchServiceHandler = (*latchService)(nil)

// LatchEnded implements fsm.LatchObserver: it wakes the waits of the
// generation.
func (e *events) LatchEnded(name string, generation uint64, completed bool) {
	if completed {
		e.metrics.latches.completed.Inc()
	} else {
		e.metrics.latches.replaced.Inc()
	}
	e.waits.notify(waitKey{latchWait, name, generation}, waitOutcome{granted: completed})
}

func latchProto(i fsm.LatchInfo) *fencedv1.LatchInfo {
	return &fencedv1.LatchInfo{Name: i.Name, Generation: i.Generation, Count: i.Count, Initial: i.Initial, CreatedAtUnixMs: i.CreatedAt}
}

// Create implements LatchServiceHandler.
func (h *latchService) Create(ctx context.Context, req *connect.Request[fencedv1.LatchCreateRequest]) (*connect.Response[fencedv1.LatchCreateResponse], error) {
	m := req.Msg
	if err := fence.ValidateName(m.Name); err != nil {
		return nil, toConnect(err)
	}
	if err := validateRequestID(m.RequestId); err != nil {
		return nil, toConnect(err)
	}
	if most := h.s.cfg.Limits.MaxLatchCount; most > 0 && m.Count > most {
		return nil, toConnect(fmt.Errorf("%w: latch count %d is above the limit %d (--max-latch-count)", fence.ErrInvalidArgument, m.Count, most))
	}
	res, err := h.s.propose(ctx, &statev1.Command{Op: &statev1.Command_LatchCreate{LatchCreate: &statev1.LatchCreate{Name: m.Name, Count: m.Count, RequestId: m.RequestId}}})
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&fencedv1.LatchCreateResponse{Latch: latchProto(res.Latch.Latch), Replaced: res.Latch.Replaced}), nil
}

func countDownProto(r fsm.CountDownResult) fencedv1.LatchCountDownResult {
	switch r {
	case fsm.Counted:
		return fencedv1.LatchCountDownResult_LATCH_COUNT_DOWN_RESULT_COUNTED
	case fsm.Completed:
		return fencedv1.LatchCountDownResult_LATCH_COUNT_DOWN_RESULT_COMPLETED
	case fsm.AlreadyComplete:
		return fencedv1.LatchCountDownResult_LATCH_COUNT_DOWN_RESULT_ALREADY_COMPLETE
	case fsm.StaleGeneration:
		return fencedv1.LatchCountDownResult_LATCH_COUNT_DOWN_RESULT_STALE_GENERATION
	case fsm.Duplicate:
		return fencedv1.LatchCountDownResult_LATCH_COUNT_DOWN_RESULT_DUPLICATE
	}
	return fencedv1.LatchCountDownResult_LATCH_COUNT_DOWN_RESULT_UNSPECIFIED
}

// CountDown implements LatchServiceHandler.
func (h *latchService) CountDown(ctx context.Context, req *connect.Request[fencedv1.LatchCountDownRequest]) (*connect.Response[fencedv1.LatchCountDownResponse], error) {
	m := req.Msg
	if err := fence.ValidateName(m.Name); err != nil {
		return nil, toConnect(err)
	}
	if err := validateRequestID(m.RequestId); err != nil {
		return nil, toConnect(err)
	}
	res, err := h.s.propose(ctx, &statev1.Command{Op: &statev1.Command_LatchCountDown{LatchCountDown: &statev1.LatchCountDown{Name: m.Name, Generation: m.Generation, RequestId: m.RequestId}}})
	if err != nil {
		return nil, toConnect(err)
	}
	h.s.metrics.latches.countDowns.WithLabelValues(res.Latch.CountDown.String()).Inc()
	return connect.NewResponse(&fencedv1.LatchCountDownResponse{Result: countDownProto(res.Latch.CountDown), Latch: latchProto(res.Latch.Latch)}), nil
}

// Wait implements LatchServiceHandler: it answers completed once the
// generation's count is zero (pushed when that count-down is applied),
// replaced once a reset replaced it, or neither when wait_ms passes.
func (h *latchService) Wait(ctx context.Context, req *connect.Request[fencedv1.LatchWaitRequest]) (*connect.Response[fencedv1.LatchWaitResponse], error) {
	m := req.Msg
	if err := fence.ValidateName(m.Name); err != nil {
		return nil, toConnect(err)
	}
	if err := fence.ValidateWaitMillis(m.WaitMs); err != nil {
		return nil, toConnect(err)
	}
	key := waitKey{latchWait, m.Name, m.Generation}
	ch := h.s.waits.add(key)
	defer h.s.waits.remove(key, ch)
	look := func() (*fencedv1.LatchWaitResponse, error) {
		var info fsm.LatchInfo
		h.s.sm.read(func(fm *fsm.Machine) { info = fm.Latch(m.Name) })
		resp := &fencedv1.LatchWaitResponse{Latch: latchProto(info)}
		switch {
		case !info.Exists() || m.Generation == 0 || m.Generation > info.Generation:
			return nil, fmt.Errorf("%w: latch %q has no generation %d (its current generation is %d)", fence.ErrInvalidArgument, m.Name, m.Generation, info.Generation)
		case m.Generation < info.Generation:
			resp.Replaced = true
		case h.s.faults.latchDone(info.Count):
			resp.Completed = true
		}
		return resp, nil
	}
	// The state is read after the waiter is registered: an end applied
	// before is seen here, one applied after is pushed.
	resp, err := look()
	if err != nil || resp.Completed || resp.Replaced || m.WaitMs == 0 {
		if err != nil {
			return nil, toConnect(err)
		}
		return connect.NewResponse(resp), nil
	}
	timer := time.NewTimer(time.Duration(m.WaitMs) * time.Millisecond)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
	case <-ctx.Done():
		return nil, toConnect(ctx.Err())
	case <-h.s.ctx.Done():
		return nil, toConnect(errUnavailable)
	}
	if resp, err = look(); err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(resp), nil
}

// Join implements LatchServiceHandler.
func (h *latchService) Join(ctx context.Context, req *connect.Request[fencedv1.LatchJoinRequest]) (*connect.Response[fencedv1.LatchJoinResponse], error) {
	m := req.Msg
	if err := fence.ValidateName(m.Name); err != nil {
		return nil, toConnect(err)
	}
	var info fsm.LatchInfo
	h.s.sm.read(func(fm *fsm.Machine) { info = fm.Latch(m.Name) })
	if !info.Exists() {
		return nil, toConnect(fmt.Errorf("%w: latch %q does not exist; create it first", fence.ErrInvalidArgument, m.Name))
	}
	return connect.NewResponse(&fencedv1.LatchJoinResponse{Latch: latchProto(info)}), nil
}

// latchMetrics are the latches' metrics.
type latchMetrics struct {
	completed, replaced prometheus.Counter
	countDowns          *prometheus.CounterVec
}

func newLatchMetrics(reg *prometheus.Registry, sm *stateMachine) *latchMetrics {
	m := &latchMetrics{
		completed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenced_latch_completions_total", Help: "Latch generations whose count reached zero (on this node's state machine).",
		}),
		replaced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenced_latch_resets_total", Help: "Latch generations replaced by a reset before they reached zero.",
		}),
		countDowns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenced_latch_count_downs_total", Help: "Count-downs answered by this node, by result: counted, completed, already_complete, stale_generation, duplicate.",
		}, []string{"result"}),
	}
	reg.MustRegister(m.completed, m.replaced, m.countDowns, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fenced_latches", Help: "Latches in the state."}, func() float64 {
		var v int
		sm.read(func(fm *fsm.Machine) { v = fm.LatchCount() })
		return float64(v)
	}))
	return m
}
