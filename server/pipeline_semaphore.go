package server

import (
	"context"

	"google.golang.org/protobuf/proto"

	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// runSemaphore performs a pipelined semaphore call: raw is a serialized
// SemaphoreCall; the answer carries a serialized SemaphoreResult.
func (p *pipeline) runSemaphore(ctx context.Context, id uint64, raw []byte) *fencedv1.PipelineResult {
	var call fencedv1.SemaphoreCall
	return p.runSerialized(ctx, id, raw, &call, func() (pipelinedCall, bool) {
		switch c := call.GetCall().(type) {
		case *fencedv1.SemaphoreCall_Acquire:
			return unaryCall(c.Acquire, p.semaphores.Acquire, func(r *fencedv1.SemaphoreAcquireResponse) proto.Message {
				return &fencedv1.SemaphoreResult{Result: &fencedv1.SemaphoreResult_Acquire{Acquire: r}}
			}), true
		case *fencedv1.SemaphoreCall_Release:
			return unaryCall(c.Release, p.semaphores.Release, func(r *fencedv1.SemaphoreReleaseResponse) proto.Message {
				return &fencedv1.SemaphoreResult{Result: &fencedv1.SemaphoreResult_Release{Release: r}}
			}), true
		}
		return pipelinedCall{}, false
	}, func(out []byte) *fencedv1.PipelineResult {
		return &fencedv1.PipelineResult{Id: id, Result: &fencedv1.PipelineResult_Semaphore{Semaphore: out}}
	})
}
