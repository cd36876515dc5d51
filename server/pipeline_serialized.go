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

// Some pipelined calls travel serialized, in a bytes field of PipelineCall
// and PipelineResult, because their messages are defined in files that
// import fenced.proto, which therefore cannot name them (semaphore.proto,
// rwlock.proto; queue.proto's calls, older, have runQueue).

// pipelinedCall is the one call a serialized pipelined call carries: its
// request, which authorization looks at, and how to run it through the
// unary handler of its kind, returning the result to serialize.
type pipelinedCall struct {
	req any
	run func(context.Context) (proto.Message, error)
}

// unaryCall is the pipelinedCall of req run through handler, its answer
// put in the result message by wrap.
func unaryCall[Req, Resp any](req *Req, handler func(context.Context, *connect.Request[Req]) (*connect.Response[Resp], error), wrap func(*Resp) proto.Message) pipelinedCall {
	return pipelinedCall{req: req, run: func(ctx context.Context) (proto.Message, error) {
		r, err := handler(ctx, connect.NewRequest(req))
		if err != nil {
			return nil, err
		}
		return wrap(r.Msg), nil
	}}
}

// runSerialized performs the pipelined call id, raw, which decodes into
// call; pick returns the call it carries (false: none). It is authorized
// as its unary call would be, and its result goes back serialized in the
// PipelineResult wrap makes of the bytes.
func (p *pipeline) runSerialized(ctx context.Context, id uint64, raw []byte, call proto.Message, pick func() (pipelinedCall, bool), wrap func([]byte) *fencedv1.PipelineResult) *fencedv1.PipelineResult {
	if err := p.s.faults.oldPipelineCall(id); err != nil {
		return pipelineError(id, err)
	}
	kind := call.ProtoReflect().Descriptor().Name()
	if err := proto.Unmarshal(raw, call); err != nil {
		return pipelineError(id, fmt.Errorf("%w: call %d is not a %s: %v", fence.ErrInvalidArgument, id, kind, err))
	}
	pc, ok := pick()
	if !ok {
		return pipelineError(id, fmt.Errorf("%w: call %d: the %s carries no call this server knows", fence.ErrInvalidArgument, id, kind))
	}
	if err := p.s.authorize(ctx, fencedv1connect.LockServicePipelineProcedure, needOf(pc.req)); err != nil {
		return pipelineError(id, err)
	}
	res, err := pc.run(ctx)
	return serializedAnswer(id, res, err, wrap)
}

// serializedAnswer is the answer of the pipelined call id whose result
// res travels serialized, in the PipelineResult wrap makes of the bytes,
// or its error err.
func serializedAnswer(id uint64, res proto.Message, err error, wrap func([]byte) *fencedv1.PipelineResult) *fencedv1.PipelineResult {
	if err != nil {
		return pipelineError(id, err)
	}
	out, err := proto.Marshal(res)
	if err != nil {
		return pipelineError(id, err)
	}
	return wrap(out)
}
