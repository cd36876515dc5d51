package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// Work queue calls ride the endpoint's pipeline (PipelineCall.queue
// carries a serialized QueueCall). A server older than this SDK may not
// know a pipelined call: one without queue calls in its Pipeline, or
// without the batch calls. It answers InvalidArgument without doing
// anything, and the SDK sends that call, and every later call of its
// kind to that endpoint, unary instead (unaryQueue).

// queueKind is a bit of endpoint.unaryQueue: a kind of queue call the
// endpoint's Pipeline does not know.
type queueKind uint32

const (
	queueKindBasic queueKind = 1 << iota // push, claim, ack, nack
	queueKindBatch                       // push batch, ack batch
)

// pipelineUnknown reports the answer of a server whose Pipeline does not
// know a call: its words for a PipelineCall without a known call (a
// server from before pipelined queue calls) or for a QueueCall without one
// (before the batch calls).
func pipelineUnknown(err error) bool {
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "has no acquire, release or kv_put") || strings.Contains(msg, "the queue call has no push, claim, ack or nack")
}

// queueCall sends a work queue call of kind through the endpoint's
// pipeline and returns its answer, or, when the endpoint's Pipeline does
// not know that kind, returns errUnaryQueue for the caller to send it
// unary.
func (ep *endpoint) queueCall(ctx context.Context, kind queueKind, call *fencedv1.QueueCall) (*fencedv1.QueueResult, error) {
	if queueKind(ep.unaryQueue.Load())&kind != 0 {
		return nil, errUnaryQueue
	}
	raw, err := proto.Marshal(call)
	if err != nil {
		return nil, err
	}
	r, err := ep.pipe.call(ctx, &fencedv1.PipelineCall{Call: &fencedv1.PipelineCall_Queue{Queue: raw}})
	if pipelineUnknown(err) {
		orBits(&ep.unaryQueue, uint32(kind))
		return nil, errUnaryQueue
	}
	if err != nil {
		return nil, err
	}
	var res fencedv1.QueueResult
	if err := proto.Unmarshal(r.GetQueue(), &res); err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("the pipelined queue call's answer is not a QueueResult: %w", err))
	}
	return &res, nil
}

// errUnaryQueue tells a queue call to go unary.
var errUnaryQueue = errors.New("client: the server's Pipeline does not know this queue call")

func orBits(v *atomic.Uint32, bits uint32) {
	for {
		old := v.Load()
		if old&bits == bits || v.CompareAndSwap(old, old|bits) {
			return
		}
	}
}

// queuePush sends a Push through the endpoint's pipeline (or unary).
func (ep *endpoint) queuePush(ctx context.Context, req *fencedv1.QueuePushRequest) (*fencedv1.QueuePushResponse, error) {
	r, err := ep.queueCall(ctx, queueKindBasic, &fencedv1.QueueCall{Call: &fencedv1.QueueCall_Push{Push: req}})
	if err == errUnaryQueue {
		return unary(ep.queues.Push(ctx, connect.NewRequest(req)))
	}
	return r.GetPush(), err
}

// queueClaim sends a Claim through the endpoint's pipeline (or unary).
func (ep *endpoint) queueClaim(ctx context.Context, req *fencedv1.QueueClaimRequest) (*fencedv1.QueueClaimResponse, error) {
	r, err := ep.queueCall(ctx, queueKindBasic, &fencedv1.QueueCall{Call: &fencedv1.QueueCall_Claim{Claim: req}})
	if err == errUnaryQueue {
		return unary(ep.queues.Claim(ctx, connect.NewRequest(req)))
	}
	return r.GetClaim(), err
}

// queueAck sends an Ack through the endpoint's pipeline (or unary).
func (ep *endpoint) queueAck(ctx context.Context, req *fencedv1.QueueAckRequest) error {
	_, err := ep.queueCall(ctx, queueKindBasic, &fencedv1.QueueCall{Call: &fencedv1.QueueCall_Ack{Ack: req}})
	if err == errUnaryQueue {
		_, err = ep.queues.Ack(ctx, connect.NewRequest(req))
	}
	return err
}

// queueNack sends a Nack through the endpoint's pipeline (or unary).
func (ep *endpoint) queueNack(ctx context.Context, req *fencedv1.QueueNackRequest) error {
	_, err := ep.queueCall(ctx, queueKindBasic, &fencedv1.QueueCall{Call: &fencedv1.QueueCall_Nack{Nack: req}})
	if err == errUnaryQueue {
		_, err = ep.queues.Nack(ctx, connect.NewRequest(req))
	}
	return err
}

// queuePushBatch sends a PushBatch through the endpoint's pipeline (or
// unary).
func (ep *endpoint) queuePushBatch(ctx context.Context, req *fencedv1.QueuePushBatchRequest) (*fencedv1.QueuePushBatchResponse, error) {
	r, err := ep.queueCall(ctx, queueKindBatch, &fencedv1.QueueCall{Call: &fencedv1.QueueCall_PushBatch{PushBatch: req}})
	if err == errUnaryQueue {
		return unary(ep.queues.PushBatch(ctx, connect.NewRequest(req)))
	}
	return r.GetPushBatch(), err
}

// queueAckBatch sends an AckBatch through the endpoint's pipeline (or
// unary).
func (ep *endpoint) queueAckBatch(ctx context.Context, req *fencedv1.QueueAckBatchRequest) (*fencedv1.QueueAckBatchResponse, error) {
	r, err := ep.queueCall(ctx, queueKindBatch, &fencedv1.QueueCall{Call: &fencedv1.QueueCall_AckBatch{AckBatch: req}})
	if err == errUnaryQueue {
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
