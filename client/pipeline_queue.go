package client

import (
	"context"

	"connectrpc.com/connect"

	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// Work queue calls ride the endpoint's pipeline (PipelineCall.queue
// carries a serialized QueueCall) when the server's Pipeline takes them:
// the stream's first response names the kinds of call it takes
// (PipelineResponse.calls). A call of a kind it does not name goes unary,
// and so does one sent before that response arrived: a server from
// before the field names nothing and is taken as the oldest, whose
// Pipeline takes lock and kv calls only.

// queueCall sends a work queue call of kind through the endpoint's
// pipeline and returns its answer, or, when the endpoint's Pipeline does
// not take that kind (or has not said yet), returns errUnary for the
// caller to send it unary.
func (ep *endpoint) queueCall(ctx context.Context, kind fencedv1.PipelineCallKind, call *fencedv1.QueueCall) (*fencedv1.QueueResult, error) {
	var res fencedv1.QueueResult
	err := ep.serializedCall(ctx, kind, call, &res,
		func(raw []byte) *fencedv1.PipelineCall {
			return &fencedv1.PipelineCall{Call: &fencedv1.PipelineCall_Queue{Queue: raw}}
		},
		(*fencedv1.PipelineResult).GetQueue)
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// The kinds of queue call, as PipelineResponse.calls names them.
const (
	queueKindBasic = fencedv1.PipelineCallKind_PIPELINE_CALL_KIND_QUEUE       // push, claim, ack, nack
	queueKindBatch = fencedv1.PipelineCallKind_PIPELINE_CALL_KIND_QUEUE_BATCH // push batch, ack batch
)

// queuePush sends a Push through the endpoint's pipeline (or unary).
func (ep *endpoint) queuePush(ctx context.Context, req *fencedv1.QueuePushRequest) (*fencedv1.QueuePushResponse, error) {
	r, err := ep.queueCall(ctx, queueKindBasic, &fencedv1.QueueCall{Call: &fencedv1.QueueCall_Push{Push: req}})
	if err == errUnary {
		return unary(ep.queues.Push(ctx, connect.NewRequest(req)))
	}
	return r.GetPush(), err
}

// queueClaim sends a Claim through the endpoint's pipeline (or unary).
func (ep *endpoint) queueClaim(ctx context.Context, req *fencedv1.QueueClaimRequest) (*fencedv1.QueueClaimResponse, error) {
	r, err := ep.queueCall(ctx, queueKindBasic, &fencedv1.QueueCall{Call: &fencedv1.QueueCall_Claim{Claim: req}})
	if err == errUnary {
		return unary(ep.queues.Claim(ctx, connect.NewRequest(req)))
	}
	return r.GetClaim(), err
}

// queueAck sends an Ack through the endpoint's pipeline (or unary).
func (ep *endpoint) queueAck(ctx context.Context, req *fencedv1.QueueAckRequest) error {
	_, err := ep.queueCall(ctx, queueKindBasic, &fencedv1.QueueCall{Call: &fencedv1.QueueCall_Ack{Ack: req}})
	if err == errUnary {
		_, err = ep.queues.Ack(ctx, connect.NewRequest(req))
	}
	return err
}

// queueNack sends a Nack through the endpoint's pipeline (or unary).
func (ep *endpoint) queueNack(ctx context.Context, req *fencedv1.QueueNackRequest) error {
	_, err := ep.queueCall(ctx, queueKindBasic, &fencedv1.QueueCall{Call: &fencedv1.QueueCall_Nack{Nack: req}})
	if err == errUnary {
		_, err = ep.queues.Nack(ctx, connect.NewRequest(req))
	}
	return err
}

// queuePushBatch sends a PushBatch through the endpoint's pipeline (or
// unary).
func (ep *endpoint) queuePushBatch(ctx context.Context, req *fencedv1.QueuePushBatchRequest) (*fencedv1.QueuePushBatchResponse, error) {
	r, err := ep.queueCall(ctx, queueKindBatch, &fencedv1.QueueCall{Call: &fencedv1.QueueCall_PushBatch{PushBatch: req}})
	if err == errUnary {
		return unary(ep.queues.PushBatch(ctx, connect.NewRequest(req)))
	}
	return r.GetPushBatch(), err
}

// queueAckBatch sends an AckBatch through the endpoint's pipeline (or
// unary).
func (ep *endpoint) queueAckBatch(ctx context.Context, req *fencedv1.QueueAckBatchRequest) (*fencedv1.QueueAckBatchResponse, error) {
	r, err := ep.queueCall(ctx, queueKindBatch, &fencedv1.QueueCall{Call: &fencedv1.QueueCall_AckBatch{AckBatch: req}})
	if err == errUnary {
		return unary(ep.queues.AckBatch(ctx, connect.NewRequest(req)))
	}
	return r.GetAckBatch(), err
}

// unary returns a unary call's message.
func unary[T any](r *connect.Response[T], err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	return r.Msg, nil
}
