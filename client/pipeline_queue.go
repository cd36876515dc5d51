package client

import (
	"context"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// queueCall sends a work queue call through the endpoint's pipeline
// (PipelineCall.queue carries it serialized) and returns its answer.
func (ep *endpoint) queueCall(ctx context.Context, call *fencedv1.QueueCall) (*fencedv1.QueueResult, error) {
	raw, err := proto.Marshal(call)
	if err != nil {
		return nil, err
	}
	r, err := ep.pipe.call(ctx, &fencedv1.PipelineCall{Call: &fencedv1.PipelineCall_Queue{Queue: raw}})
	if err != nil {
		return nil, err
	}
	var res fencedv1.QueueResult
	if err := proto.Unmarshal(r.GetQueue(), &res); err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("the pipelined queue call's answer is not a QueueResult: %w", err))
	}
	return &res, nil
}

// queuePush sends a Push through the endpoint's pipeline.
func (ep *endpoint) queuePush(ctx context.Context, req *fencedv1.QueuePushRequest) (*fencedv1.QueuePushResponse, error) {
	r, err := ep.queueCall(ctx, &fencedv1.QueueCall{Call: &fencedv1.QueueCall_Push{Push: req}})
	return r.GetPush(), err
}

// queueClaim sends a Claim through the endpoint's pipeline.
func (ep *endpoint) queueClaim(ctx context.Context, req *fencedv1.QueueClaimRequest) (*fencedv1.QueueClaimResponse, error) {
	r, err := ep.queueCall(ctx, &fencedv1.QueueCall{Call: &fencedv1.QueueCall_Claim{Claim: req}})
	return r.GetClaim(), err
}

// queueAck sends an Ack through the endpoint's pipeline.
func (ep *endpoint) queueAck(ctx context.Context, req *fencedv1.QueueAckRequest) error {
	_, err := ep.queueCall(ctx, &fencedv1.QueueCall{Call: &fencedv1.QueueCall_Ack{Ack: req}})
	return err
}

// queueNack sends a Nack through the endpoint's pipeline.
func (ep *endpoint) queueNack(ctx context.Context, req *fencedv1.QueueNackRequest) error {
	_, err := ep.queueCall(ctx, &fencedv1.QueueCall{Call: &fencedv1.QueueCall_Nack{Nack: req}})
	return err
}
