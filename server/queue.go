package server

import (
	"context"
	"errors"
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

// QueueConfig bounds the work queue (docs/queue.md). The leader's values
// go into each push, so every replica decides alike. A zero field takes
// its default.
type QueueConfig struct {
	// MaxPayloadBytes is the largest item payload. Default 256 KiB; at most
	// 1 MiB (fsm.MaxQueuePayloadBytes).
	MaxPayloadBytes int
	// MaxDeliveries is how many deliveries an item gets before it moves to
	// the dead-letter queue NAME.dead, unless its push sets its own.
	// Default 5; 1 to 1000.
	MaxDeliveries int
	// DedupeKeys is how many dedupe keys each queue remembers (the oldest
	// is forgotten first): a retried push de-duplicates only while its key
	// is among them. Default 10000; at most 1048576.
	DedupeKeys int
	// MaxItems and MaxBytes bound every queue together: items (dead-letter
	// queues included) and the bytes of their payloads. A push past either
	// is refused with fence.ErrLimitExceeded. Default 100000 items and
	// 256 MiB.
	MaxItems int
	MaxBytes int64
	// MaxBatch bounds a batch (docs/queue.md, "Batches"): the items of a
	// PushBatch, of a batch claim (max_items), and the acks of a claim or
	// an AckBatch. Default 32; 1 to 32 (fsm.MaxQueueBatch).
	MaxBatch int
}

// Defaults of QueueConfig.
const (
	DefaultQueueMaxPayloadBytes = 256 << 10
	DefaultQueueMaxDeliveries   = 5
	DefaultQueueDedupeKeys      = 10000
	DefaultQueueMaxItems        = 100000
	DefaultQueueMaxBytes        = 256 << 20
	DefaultQueueMaxBatch        = fsm.MaxQueueBatch
	maxQueueDeliveries          = 1000
	maxQueueStatsItems          = 1000
)

func (c QueueConfig) withDefaults() QueueConfig {
	if c.MaxPayloadBytes == 0 {
		c.MaxPayloadBytes = DefaultQueueMaxPayloadBytes
	}
	if c.MaxDeliveries == 0 {
		c.MaxDeliveries = DefaultQueueMaxDeliveries
	}
	if c.DedupeKeys == 0 {
		c.DedupeKeys = DefaultQueueDedupeKeys
	}
	if c.MaxItems == 0 {
		c.MaxItems = DefaultQueueMaxItems
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultQueueMaxBytes
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = DefaultQueueMaxBatch
	}
	return c
}

func (c QueueConfig) validate() []error {
	c = c.withDefaults()
	var errs []error
	if c.MaxPayloadBytes < 1 || c.MaxPayloadBytes > fsm.MaxQueuePayloadBytes {
		errs = append(errs, fmt.Errorf("queue max payload %d bytes is out of range; want 1 to %d", c.MaxPayloadBytes, fsm.MaxQueuePayloadBytes))
	}
	if c.MaxDeliveries < 1 || c.MaxDeliveries > maxQueueDeliveries {
		errs = append(errs, fmt.Errorf("queue max deliveries %d is out of range; want 1 to %d", c.MaxDeliveries, maxQueueDeliveries))
	}
	if c.DedupeKeys < 1 || c.DedupeKeys > fsm.MaxDedupeWindow {
		errs = append(errs, fmt.Errorf("queue dedupe keys %d is out of range; want 1 to %d", c.DedupeKeys, fsm.MaxDedupeWindow))
	}
	if c.MaxItems < 1 {
		errs = append(errs, fmt.Errorf("queue max items %d must be at least 1", c.MaxItems))
	}
	if c.MaxBytes < 1 {
		errs = append(errs, fmt.Errorf("queue max bytes %d must be at least 1", c.MaxBytes))
	}
	if c.MaxBatch < 1 || c.MaxBatch > fsm.MaxQueueBatch {
		errs = append(errs, fmt.Errorf("queue max batch %d is out of range; want 1 to %d", c.MaxBatch, fsm.MaxQueueBatch))
	}
	return errs
}

// queueMetrics count the work queue's traffic on this node's API.
type queueMetrics struct {
	ops      *prometheus.CounterVec
	expiries prometheus.Counter
	batch    *prometheus.HistogramVec
}

func newQueueMetrics(reg *prometheus.Registry, sm *stateMachine) *queueMetrics {
	m := &queueMetrics{
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenced_queue_requests_total", Help: "Work-queue requests this node answered, by op (push, claim, ack, nack, extend) and outcome (ok, duplicate, empty, stale, error).",
		}, []string{"op", "outcome"}),
		expiries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenced_queue_claim_expiries_total", Help: "Claims ended by expiry (their visibility timeout, or their session's TTL, ran out), on this node's state machine.",
		}),
		batch: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "fenced_queue_batch_items", Help: "Items per work-queue call that succeeded, by op: push (a Push is 1, a PushBatch its items), claim (items claimed), ack (acks an AckBatch or a claim carried).",
			Buckets: []float64{1, 2, 4, 8, 16, 32},
		}, []string{"op"}),
	}
	gauge := func(name, help string, f func(*fsm.Machine) int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			var v int
			sm.read(func(fm *fsm.Machine) { v = f(fm) })
			return float64(v)
		})
	}
	reg.MustRegister(m.ops, m.expiries, m.batch,
		gauge("fenced_queue_items", "Items in every work queue (dead-letter queues included), claimed or not.", (*fsm.Machine).QueueItemCount),
		gauge("fenced_queue_claims", "Live claims of work-queue items.", func(fm *fsm.Machine) int { return len(fm.Claims()) }),
	)
	return m
}

func (m *queueMetrics) count(op string, err error, outcome string) {
	switch {
	case errors.Is(err, fence.ErrStaleToken):
		outcome = "stale"
	case err != nil:
		outcome = "error"
	}
	m.ops.WithLabelValues(op, outcome).Inc()
}

// queueService implements the QueueService API.
type queueService struct{ s *Server }

var _ fencedv1connect.QueueServiceHandler = (*queueService)(nil)

// Push implements QueueServiceHandler.
func (h *queueService) Push(ctx context.Context, req *connect.Request[fencedv1.QueuePushRequest]) (*connect.Response[fencedv1.QueuePushResponse], error) {
	m := req.Msg
	push, err := h.s.queuePush(m.Queue, m.Payload, m.DedupeKey, m.DelayMs, m.MaxDeliveries)
	if err != nil {
		h.s.queueMetrics.count("push", err, "")
		return nil, toConnect(err)
	}
	res, err := h.s.propose(ctx, &statev1.Command{Op: &statev1.Command_QueuePush{QueuePush: push}})
	err = h.s.queueLimitErr(err)
	outcome := "ok"
	if res.Queue.Duplicate {
		outcome = "duplicate"
	}
	h.s.queueMetrics.count("push", err, outcome)
	if err != nil {
		return nil, toConnect(err)
	}
	h.s.queueMetrics.batch.WithLabelValues("push").Observe(1)
	return connect.NewResponse(&fencedv1.QueuePushResponse{Item: res.Queue.Item, Duplicate: res.Queue.Duplicate}), nil
}

// Claim implements QueueServiceHandler. A claim that finds no available
// item with wait_ms > 0 queues its session and blocks until an item is
// pushed to it (Server.await), the wait runs out or the call ends; then
// the session leaves the queue, or, if a claim won that race, the call
// returns it.
func (h *queueService) Claim(ctx context.Context, req *connect.Request[fencedv1.QueueClaimRequest]) (*connect.Response[fencedv1.QueueClaimResponse], error) {
	m := req.Msg
	err := errors.Join(fsm.ValidateQueueName(m.Queue), fsm.ValidateVisibilityMillis(m.VisibilityMs), fence.ValidateWaitMillis(m.WaitMs))
	if m.Session == 0 {
		err = errors.Join(err, fmt.Errorf("%w: a claim needs a session (session is 0): create one first", fence.ErrInvalidArgument))
	}
	if m.AckItem != 0 || m.AckToken != 0 {
		if m.AckItem == 0 {
			err = errors.Join(err, fmt.Errorf("%w: ack_token %d without ack_item: a claim's ack needs both", fence.ErrInvalidArgument, m.AckToken))
		}
		err = errors.Join(err, fence.ValidateToken(fence.Token(m.AckToken)))
	}
	err = errors.Join(err, h.s.checkClaimBatch(m))
	if err != nil {
		h.s.queueMetrics.count("claim", err, "")
		return nil, toConnect(err)
	}
	hash, err := h.s.checkOwner(m.Session, m.Secret, false)
	if err != nil {
		return nil, toConnect(err)
	}
	res, err := h.s.propose(ctx, &statev1.Command{Op: &statev1.Command_QueueClaim{QueueClaim: &statev1.QueueClaim{
		Session: m.Session, Seq: m.Seq, Queue: m.Queue, VisibilityMs: m.VisibilityMs, Wait: m.WaitMs > 0, Quota: h.s.quota(ctx), SecretHash: hash,
		AckItem: m.AckItem, AckToken: m.AckToken, MaxItems: m.MaxItems, Acks: ackItemsState(m.Acks),
	}}})
	acks := res.Queue.Acks // applied with the claim, whatever the wait does
	if err == nil {
		h.s.queueMetrics.countAcks(acks)
	}
	if err == nil && res.Queued {
		res, err = h.s.awaitClaim(ctx, m.Queue, m.Session, m.Seq, time.Duration(m.WaitMs)*time.Millisecond)
	}
	outcome := "ok"
	if !res.Granted {
		outcome = "empty"
	}
	h.s.queueMetrics.count("claim", err, outcome)
	if err != nil {
		return nil, toConnect(h.s.limitErr(err))
	}
	resp := &fencedv1.QueueClaimResponse{AckOutcome: fencedv1.AckOutcome(fsmFirstAck(acks)), AckOutcomes: ackOutcomesProto(acks)}
	if res.Granted {
		resp.Claimed, resp.Claim = true, claimProto(res.Queue.Claim)
		claims := res.Queue.Claims
		if len(claims) == 0 {
			claims = []fsm.ClaimInfo{res.Queue.Claim} // as before batch claims
		}
		for _, c := range claims {
			resp.Claims = append(resp.Claims, claimProto(c))
		}
		h.s.queueMetrics.batch.WithLabelValues("claim").Observe(float64(len(claims)))
	}
	return connect.NewResponse(resp), nil
}

// ackMetricOutcome is the fenced_queue_requests_total outcome of an ack
// a claim or an ack batch carried.
var ackMetricOutcome = map[fsm.AckOutcome]string{fsm.AckAcked: "ok", fsm.AckStale: "stale", fsm.AckNotFound: "error"}

// awaitClaim waits for the queued claim seq of session on queue.
func (s *Server) awaitClaim(ctx context.Context, queue string, session, seq uint64, wait time.Duration) (fsm.Result, error) {
	var claim fsm.ClaimInfo
	look := func(m *fsm.Machine) waitState {
		ci, live, queued := m.ClaimOfRequest(session, seq, queue)
		if live {
			claim = ci
		}
		return waitState{granted: live, grant: ci.Grant, queued: queued}
	}
	cancel := &statev1.Command{Op: &statev1.Command_QueueCancelWait{QueueCancelWait: &statev1.QueueCancelWait{Session: session, Queue: queue, Seq: seq}}}
	res, err := s.await(ctx, waitKey{fence.KindClaim, queue, session}, wait, look, cancel)
	if err != nil || !res.Granted {
		return res, err
	}
	if res.Queue.Claim.Item != 0 {
		return res, nil // the cancel's result: the claims that won the race
	}
	// Pushed to this call: read the claims of the request (a batch claim
	// that waited may get several).
	var claims []fsm.ClaimInfo
	s.sm.read(func(m *fsm.Machine) { claims = m.ClaimsOfRequest(session, seq, queue) })
	if len(claims) == 0 && claim.Grant.Token == res.Grant.Token && claim.Item != 0 {
		claims = []fsm.ClaimInfo{claim}
	}
	if len(claims) == 0 {
		return fsm.Result{}, fmt.Errorf("%w: the claim with token %d of queue %q ended before its reply was sent", fence.ErrStaleToken, res.Grant.Token, queue)
	}
	res.Queue.Claim, res.Queue.Claims = claims[0], claims
	return res, nil
}

func validateHeld(queue string, item, token uint64) error {
	err := fsm.ValidateQueueName(queue)
	if item == 0 {
		err = errors.Join(err, fmt.Errorf("%w: item is 0", fence.ErrInvalidArgument))
	}
	return errors.Join(err, fence.ValidateToken(fence.Token(token)))
}

// Ack implements QueueServiceHandler.
func (h *queueService) Ack(ctx context.Context, req *connect.Request[fencedv1.QueueAckRequest]) (*connect.Response[fencedv1.QueueAckResponse], error) {
	m := req.Msg
	err := validateHeld(m.Queue, m.Item, m.Token)
	if err == nil {
		_, err = h.s.propose(ctx, &statev1.Command{Op: &statev1.Command_QueueAck{QueueAck: &statev1.QueueAck{Queue: m.Queue, Item: m.Item, Token: m.Token}}})
	}
	h.s.queueMetrics.count("ack", err, "ok")
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&fencedv1.QueueAckResponse{}), nil
}

// Nack implements QueueServiceHandler.
func (h *queueService) Nack(ctx context.Context, req *connect.Request[fencedv1.QueueNackRequest]) (*connect.Response[fencedv1.QueueNackResponse], error) {
	m := req.Msg
	err := errors.Join(validateHeld(m.Queue, m.Item, m.Token), fsm.ValidateQueueDelayMillis(m.DelayMs))
	if err == nil {
		_, err = h.s.propose(ctx, &statev1.Command{Op: &statev1.Command_QueueNack{QueueNack: &statev1.QueueNack{Queue: m.Queue, Item: m.Item, Token: m.Token, DelayMs: m.DelayMs}}})
	}
	h.s.queueMetrics.count("nack", err, "ok")
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&fencedv1.QueueNackResponse{}), nil
}

// Extend implements QueueServiceHandler.
func (h *queueService) Extend(ctx context.Context, req *connect.Request[fencedv1.QueueExtendRequest]) (*connect.Response[fencedv1.QueueExtendResponse], error) {
	m := req.Msg
	err := errors.Join(validateHeld(m.Queue, m.Item, m.Token), fsm.ValidateVisibilityMillis(m.VisibilityMs))
	var res fsm.Result
	if err == nil {
		res, err = h.s.propose(ctx, &statev1.Command{Op: &statev1.Command_QueueExtend{QueueExtend: &statev1.QueueExtend{Queue: m.Queue, Item: m.Item, Token: m.Token, VisibilityMs: m.VisibilityMs}}})
	}
	h.s.queueMetrics.count("extend", err, "ok")
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&fencedv1.QueueExtendResponse{Claim: claimProto(res.Queue.Claim)}), nil
}

// Stats implements QueueServiceHandler: a linearizable read.
func (h *queueService) Stats(ctx context.Context, req *connect.Request[fencedv1.QueueStatsRequest]) (*connect.Response[fencedv1.QueueStatsResponse], error) {
	m := req.Msg
	err := fsm.ValidateQueueName(m.Queue)
	if m.Items > maxQueueStatsItems {
		err = errors.Join(err, fmt.Errorf("%w: items %d is above %d", fence.ErrInvalidArgument, m.Items, maxQueueStatsItems))
	}
	if err != nil {
		return nil, toConnect(err)
	}
	var st, dead fsm.QueueStats
	var items []fsm.ItemInfo
	h.s.sm.read(func(fm *fsm.Machine) {
		st, dead = fm.Queue(m.Queue), fm.Queue(m.Queue+fsm.DeadLetterSuffix)
		if m.Items > 0 {
			items = fm.QueueItems(m.Queue, m.After, int(m.Items))
		}
	})
	resp := &fencedv1.QueueStatsResponse{
		Queue: st.Name, Exists: st.Exists, Available: uint32(st.Available), Delayed: uint32(st.Delayed), Claimed: uint32(st.Claimed),
		Waiters: uint32(st.Waiters), LastItem: st.LastItem, Dead: uint32(dead.Available + dead.Delayed + dead.Claimed),
	}
	for _, it := range items {
		resp.Items = append(resp.Items, &fencedv1.QueueItemInfo{Item: claimProto(it.ClaimInfo), Claimed: it.Claimed, AvailableAtUnixMs: it.AvailableAt, EnqueuedAtUnixMs: it.EnqueuedAt})
	}
	return connect.NewResponse(resp), nil
}

func claimProto(c fsm.ClaimInfo) *fencedv1.Claim {
	return &fencedv1.Claim{Queue: c.Queue, Item: c.Item, Grant: grantProto(c.Grant), Payload: c.Payload, Deliveries: c.Deliveries, MaxDeliveries: c.MaxDeliveries, OriginItem: c.OriginItem}
}

// claimDeadlines are the live claims' visibility timeouts on this node's
// monotonic clock, keyed by claim token (unique over the cluster), from
// which the leader proposes claim expiries. They are session deadlines in
// all but name (sessionExpiry): a claim's visibility restarts in full on
// every extend and at every leader change, so the visibility timeout is a
// lower bound on a claim's life, never a promise about it.
func newClaimDeadlines(clock fence.Clock) *sessionExpiry { return newSessionExpiry(clock) }

// resetClaims tracks the claims of a restored state, each from now.
func (s *Server) resetClaims(m *fsm.Machine) {
	claims := m.Claims()
	list := make([]fsm.SessionTTL, len(claims))
	for i, c := range claims {
		list[i] = fsm.SessionTTL{ID: uint64(c.Token), TTLMs: c.Visibility.Milliseconds()}
	}
	s.claims.reset(list)
}

// ClaimStarted implements fsm.ClaimObserver: a claim was granted or
// extended.
func (e *events) ClaimStarted(tok fence.Token, visibility time.Duration) {
	e.claims.end(uint64(tok)) // an extend may shorten the deadline
	e.claims.start(uint64(tok), visibility)
}

// queueDue returns what the leader proposes for the queues on each tick
// of its expire loop: the expiry, stamped with term, of every claim whose
// visibility timeout ran out, and a QueueTick when an item whose delay
// ended waits for a waiting claim.
func (s *Server) queueDue(term uint64) []*statev1.Command {
	var due bool
	s.sm.read(func(m *fsm.Machine) { due = m.QueueDue(time.Now().UnixMilli()) })
	var cmds []*statev1.Command
	if due {
		cmds = append(cmds, &statev1.Command{Op: &statev1.Command_QueueTick{QueueTick: &statev1.QueueTick{}}})
	}
	for _, tok := range s.claims.due() {
		cmds = append(cmds, &statev1.Command{Op: &statev1.Command_ExpireClaim{ExpireClaim: &statev1.ExpireClaim{Token: tok, Term: term}}})
	}
	return cmds
}
