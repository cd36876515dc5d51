package server

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// Batches of the work queue (docs/queue.md, "Batches"): PushBatch,
// AckBatch, and a Claim's max_items and acks, each one command (one Raft
// entry), bounded by --queue-max-batch.

// checkClaimBatch checks a claim's batch fields against --queue-max-batch.
func (s *Server) checkClaimBatch(m *fencedv1.QueueClaimRequest) error {
	limit := s.cfg.Queue.withDefaults().MaxBatch
	var err error
	if int(m.MaxItems) > limit {
		err = fmt.Errorf("%w: max_items %d is above the batch limit of %d (set by fenced serve --queue-max-batch)", fence.ErrInvalidArgument, m.MaxItems, limit)
	}
	if len(m.Acks) > 0 && m.AckItem != 0 {
		err = errors.Join(err, fmt.Errorf("%w: a claim carries ack_item or acks, not both", fence.ErrInvalidArgument))
	}
	return errors.Join(err, checkAckItems(m.Acks, limit, false))
}

// checkAckItems checks the acks of a claim (none allowed) or of an ack
// batch (batch: at least one).
func checkAckItems(acks []*fencedv1.QueueAckItem, limit int, batch bool) error {
	switch {
	case batch && len(acks) == 0:
		return fmt.Errorf("%w: an ack batch needs at least one item", fence.ErrInvalidArgument)
	case len(acks) > limit:
		return fmt.Errorf("%w: %d acks are above the batch limit of %d (set by fenced serve --queue-max-batch)", fence.ErrInvalidArgument, len(acks), limit)
	}
	var err error
	for i, a := range acks {
		if a.GetItem() == 0 {
			err = errors.Join(err, fmt.Errorf("%w: ack %d: item is 0", fence.ErrInvalidArgument, i))
		}
		if e := fence.ValidateToken(fence.Token(a.GetToken())); e != nil {
			err = errors.Join(err, fmt.Errorf("ack %d: %w", i, e))
		}
	}
	return err
}

func ackItemsState(acks []*fencedv1.QueueAckItem) []*statev1.QueueItemToken {
	if len(acks) == 0 {
		return nil
	}
	out := make([]*statev1.QueueItemToken, len(acks))
	for i, a := range acks {
		out[i] = &statev1.QueueItemToken{Item: a.GetItem(), Token: a.GetToken()}
	}
	return out
}

func ackOutcomesProto(acks []fsm.AckOutcome) []fencedv1.AckOutcome {
	if len(acks) == 0 {
		return nil
	}
	out := make([]fencedv1.AckOutcome, len(acks))
	for i, a := range acks {
		out[i] = fencedv1.AckOutcome(a)
	}
	return out
}

func fsmFirstAck(acks []fsm.AckOutcome) fsm.AckOutcome {
	if len(acks) == 0 {
		return fsm.AckNone
	}
	return acks[0]
}

// countAcks counts the acks a claim or an ack batch carried.
func (m *queueMetrics) countAcks(acks []fsm.AckOutcome) {
	// Counted once per outcome, not per ack.
	var by [fsm.AckNotFound + 1]int
	for _, a := range acks {
		if int(a) < len(by) {
			by[a]++
		} else {
			m.count("ack", nil, ackMetricOutcome[a])
		}
	}
	for a, n := range by {
		m.countN("ack", ackMetricOutcome[fsm.AckOutcome(a)], n)
	}
	if len(acks) > 0 {
		m.batch.WithLabelValues("ack").Observe(float64(len(acks)))
	}
}

// countN counts n requests of op that succeeded with outcome (none when n
// is 0, so no series shows before its first request).
func (m *queueMetrics) countN(op, outcome string, n int) {
	if n > 0 {
		m.ops.WithLabelValues(op, outcome).Add(float64(n))
	}
}

// queuePush checks one push (its item's fields) and returns its command,
// with the leader's limits.
func (s *Server) queuePush(queue string, payload []byte, dedupeKey string, delayMs int64, maxDeliveries uint32) (*statev1.QueuePush, error) {
	cfg := s.cfg.Queue.withDefaults()
	err := errors.Join(fsm.ValidateQueueName(queue), fsm.ValidateQueueDelayMillis(delayMs))
	if len(payload) > cfg.MaxPayloadBytes {
		err = errors.Join(err, fmt.Errorf("%w: payload is %d bytes, above the limit of %d (set by fenced serve --queue-max-payload)", fence.ErrLimitExceeded, len(payload), cfg.MaxPayloadBytes))
	}
	if maxDeliveries > maxQueueDeliveries {
		err = errors.Join(err, fmt.Errorf("%w: max_deliveries %d is above %d", fence.ErrInvalidArgument, maxDeliveries, maxQueueDeliveries))
	}
	if len(dedupeKey) > fsm.MaxDedupeKeyLen {
		err = errors.Join(err, fmt.Errorf("%w: dedupe key is %d bytes, longer than %d", fence.ErrInvalidArgument, len(dedupeKey), fsm.MaxDedupeKeyLen))
	}
	if err != nil {
		return nil, err
	}
	if maxDeliveries == 0 {
		maxDeliveries = uint32(cfg.MaxDeliveries)
	}
	return &statev1.QueuePush{
		Queue: queue, Payload: payload, DedupeKey: dedupeKey, DelayMs: delayMs, MaxDeliveries: maxDeliveries,
		DedupeWindow: uint32(cfg.DedupeKeys), MaxPayloadBytes: uint32(cfg.MaxPayloadBytes), MaxItems: uint64(cfg.MaxItems), MaxBytes: uint64(cfg.MaxBytes),
	}, nil
}

// queueLimitErr names the flag of a queue limit a push hit.
func (s *Server) queueLimitErr(err error) error {
	var le *fsm.QueueLimitError
	if errors.As(err, &le) {
		s.limitMetrics.rejections.WithLabelValues("queue_" + le.Resource).Inc()
		err = fmt.Errorf("%w (set by fenced serve --queue-max-%s)", err, le.Resource)
	}
	return err
}

// PushBatch implements QueueServiceHandler: every item or none.
func (h *queueService) PushBatch(ctx context.Context, req *connect.Request[fencedv1.QueuePushBatchRequest]) (*connect.Response[fencedv1.QueuePushBatchResponse], error) {
	m, cfg := req.Msg, h.s.cfg.Queue.withDefaults()
	var err error
	if len(m.Items) == 0 || len(m.Items) > cfg.MaxBatch {
		err = fmt.Errorf("%w: a push batch has %d items; want 1 to %d (set by fenced serve --queue-max-batch)", fence.ErrInvalidArgument, len(m.Items), cfg.MaxBatch)
	}
	batch := &statev1.QueuePushBatch{Pushes: make([]*statev1.QueuePush, 0, len(m.Items))}
	total := 0
	for i, it := range m.Items {
		p, e := h.s.queuePush(m.Queue, it.GetPayload(), it.GetDedupeKey(), it.GetDelayMs(), it.GetMaxDeliveries())
		if e != nil {
			err = errors.Join(err, fmt.Errorf("item %d: %w", i, e))
		}
		batch.Pushes = append(batch.Pushes, p)
		total += len(it.GetPayload())
	}
	if total > cfg.MaxPayloadBytes {
		err = errors.Join(err, fmt.Errorf("%w: the batch's payloads are %d bytes together, above the limit of %d, one item's (set by fenced serve --queue-max-payload)", fence.ErrLimitExceeded, total, cfg.MaxPayloadBytes))
	}
	if err != nil {
		h.s.queueMetrics.count("push", err, "")
		return nil, toConnect(err)
	}
	res, err := h.s.propose(ctx, &statev1.Command{Op: &statev1.Command_QueuePushBatch{QueuePushBatch: batch}})
	err = h.s.queueLimitErr(err)
	if err != nil {
		h.s.queueMetrics.count("push", err, "")
		return nil, toConnect(err)
	}
	resp := &fencedv1.QueuePushBatchResponse{Items: make([]*fencedv1.QueuePushResponse, len(res.Queue.Pushed))}
	dups := 0
	for i, p := range res.Queue.Pushed {
		if p.Duplicate {
			dups++
		}
		resp.Items[i] = &fencedv1.QueuePushResponse{Item: p.Item, Duplicate: p.Duplicate}
	}
	// Counted once per outcome, not per item.
	h.s.queueMetrics.countN("push", "ok", len(resp.Items)-dups)
	h.s.queueMetrics.countN("push", "duplicate", dups)
	h.s.queueMetrics.batch.WithLabelValues("push").Observe(float64(len(resp.Items)))
	return connect.NewResponse(resp), nil
}

// AckBatch implements QueueServiceHandler: each item its own outcome.
func (h *queueService) AckBatch(ctx context.Context, req *connect.Request[fencedv1.QueueAckBatchRequest]) (*connect.Response[fencedv1.QueueAckBatchResponse], error) {
	m := req.Msg
	err := errors.Join(fsm.ValidateQueueName(m.Queue), checkAckItems(m.Items, h.s.cfg.Queue.withDefaults().MaxBatch, true))
	var res fsm.Result
	if err == nil {
		res, err = h.s.propose(ctx, &statev1.Command{Op: &statev1.Command_QueueAckBatch{QueueAckBatch: &statev1.QueueAckBatch{Queue: m.Queue, Acks: ackItemsState(m.Items)}}})
	}
	if err != nil {
		h.s.queueMetrics.count("ack", err, "")
		return nil, toConnect(err)
	}
	h.s.queueMetrics.countAcks(res.Queue.Acks)
	return connect.NewResponse(&fencedv1.QueueAckBatchResponse{Outcomes: ackOutcomesProto(res.Queue.Acks)}), nil
}
