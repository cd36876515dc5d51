package server

import (
	"context"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	fence "github.com/fenced-dev/fenced"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// unknownQueueCall is the error of a QueueCall this server does not know
// (a newer SDK's), which the SDK takes as its cue to send that call unary
// (client/pipeline_queue.go). Older servers said "the queue call has no
// push, claim, ack or nack", which the SDK recognizes too.
const unknownQueueCall = "the queue call has no push, claim, ack, nack, push batch or ack batch"

// runQueue performs a pipelined work queue call (PipelineCall.queue, a
// serialized QueueCall) through the unary handler of its kind, authorized
// as that call would be.
func (p *pipeline) runQueue(ctx context.Context, id uint64, raw []byte) *fencedv1.PipelineResult {
	var call fencedv1.QueueCall
	if err := proto.Unmarshal(raw, &call); err != nil {
		return pipelineError(id, fmt.Errorf("%w: call %d: queue is not a QueueCall: %v", fence.ErrInvalidArgument, id, err))
	}
	if err := p.s.faults.oldPipeline(id, &call); err != nil {
		return pipelineError(id, err)
	}
	var msg any
	switch c := call.GetCall().(type) {
	case *fencedv1.QueueCall_Push:
		msg = c.Push
	case *fencedv1.QueueCall_Claim:
		msg = c.Claim
	case *fencedv1.QueueCall_Ack:
		msg = c.Ack
	case *fencedv1.QueueCall_Nack:
		msg = c.Nack
	case *fencedv1.QueueCall_PushBatch:
		msg = c.PushBatch
	case *fencedv1.QueueCall_AckBatch:
		msg = c.AckBatch
	default:
		return pipelineError(id, fmt.Errorf("%w: call %d: %s", fence.ErrInvalidArgument, id, unknownQueueCall))
	}
	if err := p.s.authorize(ctx, fencedv1connect.LockServicePipelineProcedure, needOf(msg)); err != nil {
		return pipelineError(id, err)
	}
	var (
		res fencedv1.QueueResult
		err error
	)
	switch c := call.GetCall().(type) {
	case *fencedv1.QueueCall_Push:
		var r *connect.Response[fencedv1.QueuePushResponse]
		if r, err = p.queues.Push(ctx, connect.NewRequest(c.Push)); err == nil {
			res.Result = &fencedv1.QueueResult_Push{Push: r.Msg}
		}
	case *fencedv1.QueueCall_Claim:
		var r *connect.Response[fencedv1.QueueClaimResponse]
		if r, err = p.queues.Claim(ctx, connect.NewRequest(c.Claim)); err == nil {
			res.Result = &fencedv1.QueueResult_Claim{Claim: r.Msg}
		}
	case *fencedv1.QueueCall_Ack:
		var r *connect.Response[fencedv1.QueueAckResponse]
		if r, err = p.queues.Ack(ctx, connect.NewRequest(c.Ack)); err == nil {
			res.Result = &fencedv1.QueueResult_Ack{Ack: r.Msg}
		}
	case *fencedv1.QueueCall_Nack:
		var r *connect.Response[fencedv1.QueueNackResponse]
		if r, err = p.queues.Nack(ctx, connect.NewRequest(c.Nack)); err == nil {
			res.Result = &fencedv1.QueueResult_Nack{Nack: r.Msg}
		}
	case *fencedv1.QueueCall_PushBatch:
		var r *connect.Response[fencedv1.QueuePushBatchResponse]
		if r, err = p.queues.PushBatch(ctx, connect.NewRequest(c.PushBatch)); err == nil {
			res.Result = &fencedv1.QueueResult_PushBatch{PushBatch: r.Msg}
		}
	case *fencedv1.QueueCall_AckBatch:
		var r *connect.Response[fencedv1.QueueAckBatchResponse]
		if r, err = p.queues.AckBatch(ctx, connect.NewRequest(c.AckBatch)); err == nil {
			res.Result = &fencedv1.QueueResult_AckBatch{AckBatch: r.Msg}
		}
	}
	return serializedAnswer(id, &res, err, func(out []byte) *fencedv1.PipelineResult {
		return &fencedv1.PipelineResult{Id: id, Result: &fencedv1.PipelineResult_Queue{Queue: out}}
	})
}
