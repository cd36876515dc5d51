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

// runSemaphore performs a pipelined semaphore call: raw is a serialized
// SemaphoreCall, run through the unary handler of its kind (authorized
// here, as its unary call would be); the answer carries a serialized
// SemaphoreResult.
func (p *pipeline) runSemaphore(ctx context.Context, id uint64, raw []byte) *fencedv1.PipelineResult {
	if err := p.s.faults.oldPipelineCall(id); err != nil {
		return pipelineError(id, err)
	}
	var call fencedv1.SemaphoreCall
	if err := proto.Unmarshal(raw, &call); err != nil {
		return pipelineError(id, fmt.Errorf("%w: call %d: semaphore is not a SemaphoreCall: %v", fence.ErrInvalidArgument, id, err))
	}
	var msg any
	switch c := call.GetCall().(type) {
	case *fencedv1.SemaphoreCall_Acquire:
		msg = c.Acquire
	case *fencedv1.SemaphoreCall_Release:
		msg = c.Release
	default:
		return pipelineError(id, fmt.Errorf("%w: call %d: the semaphore call has no acquire or release", fence.ErrInvalidArgument, id))
	}
	if err := p.s.authorize(ctx, fencedv1connect.LockServicePipelineProcedure, needOf(msg)); err != nil {
		return pipelineError(id, err)
	}
	var (
		res fencedv1.SemaphoreResult
		err error
	)
	switch c := call.GetCall().(type) {
	case *fencedv1.SemaphoreCall_Acquire:
		var r *connect.Response[fencedv1.SemaphoreAcquireResponse]
		if r, err = p.semaphores.Acquire(ctx, connect.NewRequest(c.Acquire)); err == nil {
			res.Result = &fencedv1.SemaphoreResult_Acquire{Acquire: r.Msg}
		}
	case *fencedv1.SemaphoreCall_Release:
		var r *connect.Response[fencedv1.SemaphoreReleaseResponse]
		if r, err = p.semaphores.Release(ctx, connect.NewRequest(c.Release)); err == nil {
			res.Result = &fencedv1.SemaphoreResult_Release{Release: r.Msg}
		}
	}
	return serializedAnswer(id, &res, err, func(out []byte) *fencedv1.PipelineResult {
		return &fencedv1.PipelineResult{Id: id, Result: &fencedv1.PipelineResult_Semaphore{Semaphore: out}}
	})
}
