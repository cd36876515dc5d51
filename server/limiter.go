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

// limiterService implements the LimiterService API.
type limiterService struct{ s *Server }

var _ fencedv1connect.LimiterServiceHandler = (*limiterService)(nil)

func limiterSpecOf(p *fencedv1.LimiterSpec) fsm.LimiterSpec {
	return fsm.LimiterSpec{Algorithm: p.GetAlgorithm(), Limit: p.GetLimit(), WindowMs: p.GetWindowMs(), Segments: p.GetSegments(), Rate: p.GetRate(), Queue: p.GetQueue()}
}

func limiterSpecProto(s fsm.LimiterSpec) *fencedv1.LimiterSpec {
	return &fencedv1.LimiterSpec{Algorithm: s.Algorithm, Limit: s.Limit, WindowMs: s.WindowMs, Segments: s.Segments, Rate: s.Rate, Queue: s.Queue}
}

// Config implements LimiterServiceHandler.
func (h *limiterService) Config(ctx context.Context, req *connect.Request[fencedv1.LimiterConfigRequest]) (*connect.Response[fencedv1.LimiterConfigResponse], error) {
	m := req.Msg
	if err := fence.ValidateName(m.Name); err != nil {
		return nil, toConnect(err)
	}
	spec := limiterSpecOf(m.Spec)
	if err := spec.Validate(); err != nil {
		return nil, toConnect(err)
	}
	if most := h.s.cfg.Limits.MaxLimiterQueue; most > 0 && spec.Queue > most {
		return nil, toConnect(fmt.Errorf("%w: limiter queue %d is above the limit %d (--max-limiter-queue)", fence.ErrInvalidArgument, spec.Queue, most))
	}
	res, err := h.s.propose(ctx, &statev1.Command{Op: &statev1.Command_LimiterConfig{LimiterConfig: &statev1.LimiterConfig{Name: m.Name, Spec: spec.Proto(), Replace: m.Replace}}})
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&fencedv1.LimiterConfigResponse{Changed: res.Limiter.Changed}), nil
}

// Take implements LimiterServiceHandler. A take reserved in the queue is
// counted when it is applied, for the moment its permits are free; the
// call returns at that moment. A caller that gives up before has still
// used its permits.
func (h *limiterService) Take(ctx context.Context, req *connect.Request[fencedv1.LimiterTakeRequest]) (*connect.Response[fencedv1.LimiterTakeResponse], error) {
	m := req.Msg
	if err := fence.ValidateName(m.Name); err != nil {
		return nil, toConnect(err)
	}
	if m.Permits < 1 || m.Permits > fsm.MaxLimiterPermits {
		return nil, toConnect(fmt.Errorf("%w: permits %d is out of range 1 to the limiter's limit", fence.ErrInvalidArgument, m.Permits))
	}
	if m.MaxWaitMs < 0 || m.MaxWaitMs > fsm.MaxLimiterWaitMs {
		return nil, toConnect(fmt.Errorf("%w: max wait %dms is out of range 0 to %dms", fence.ErrInvalidArgument, m.MaxWaitMs, fsm.MaxLimiterWaitMs))
	}
	res, err := h.s.propose(ctx, &statev1.Command{Op: &statev1.Command_LimiterTake{LimiterTake: &statev1.LimiterTake{Name: m.Name, Permits: m.Permits, MaxWaitMs: m.MaxWaitMs}}})
	if err != nil {
		return nil, toConnect(err)
	}
	r := res.Limiter
	resp := &fencedv1.LimiterTakeResponse{Granted: r.Granted, WaitedMs: r.WaitMs, RetryAfterMs: r.RetryAfterMs}
	switch {
	case !r.Granted:
		h.s.metrics.limiters.decisions.WithLabelValues("refused").Inc()
	case r.WaitMs == 0:
		h.s.metrics.limiters.decisions.WithLabelValues("granted").Inc()
	default:
		h.s.metrics.limiters.decisions.WithLabelValues("waited").Inc()
		timer := time.NewTimer(time.Duration(r.WaitMs) * time.Millisecond)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
			return nil, toConnect(ctx.Err())
		case <-h.s.ctx.Done():
			return nil, toConnect(errUnavailable)
		}
	}
	return connect.NewResponse(resp), nil
}

// Describe implements LimiterServiceHandler.
func (h *limiterService) Describe(ctx context.Context, req *connect.Request[fencedv1.LimiterDescribeRequest]) (*connect.Response[fencedv1.LimiterDescribeResponse], error) {
	m := req.Msg
	if err := fence.ValidateName(m.Name); err != nil {
		return nil, toConnect(err)
	}
	var info fsm.LimiterInfo
	now := time.Now().UnixMilli()
	h.s.sm.read(func(fm *fsm.Machine) { info = fm.Limiter(m.Name, now) })
	if !info.Exists {
		return nil, toConnect(fmt.Errorf("%w: limiter %q is not configured", fence.ErrInvalidArgument, m.Name))
	}
	return connect.NewResponse(&fencedv1.LimiterDescribeResponse{Spec: limiterSpecProto(info.Spec), Available: info.Available, Waiting: uint32(info.Waiting), NowUnixMs: info.Now}), nil
}

// limiterMetrics are the limiters' metrics.
type limiterMetrics struct {
	decisions *prometheus.CounterVec
}

func newLimiterMetrics(reg *prometheus.Registry, sm *stateMachine) *limiterMetrics {
	m := &limiterMetrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenced_limiter_takes_total", Help: "Rate-limiter takes answered by this node, by outcome: granted (at once), waited (granted after waiting in the queue), refused (with a retry-after).",
		}, []string{"outcome"}),
	}
	for _, o := range []string{"granted", "waited", "refused"} {
		m.decisions.WithLabelValues(o)
	}
	reg.MustRegister(m.decisions, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fenced_limiters", Help: "Rate limiters configured."}, func() float64 {
		var v int
		sm.read(func(fm *fsm.Machine) { v = fm.LimiterCount() })
		return float64(v)
	}))
	return m
}
