package client

import (
	"context"

	"connectrpc.com/connect"

	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// Semaphore acquires and releases ride the endpoint's pipeline
// (PipelineCall.semaphore carries a serialized SemaphoreCall) when the
// server's Pipeline names PIPELINE_CALL_KIND_SEMAPHORE in its first
// response, as queue calls do (pipeline_queue.go); otherwise, and before
// that response arrived, they go unary. Verify and Describe are always
// unary.

// semaphoreCall sends a semaphore call through the endpoint's pipeline
// and returns its answer, or errUnary.
func (ep *endpoint) semaphoreCall(ctx context.Context, call *fencedv1.SemaphoreCall) (*fencedv1.SemaphoreResult, error) {
	var res fencedv1.SemaphoreResult
	err := ep.serializedCall(ctx, fencedv1.PipelineCallKind_PIPELINE_CALL_KIND_SEMAPHORE, call, &res,
		func(raw []byte) *fencedv1.PipelineCall {
			return &fencedv1.PipelineCall{Call: &fencedv1.PipelineCall_Semaphore{Semaphore: raw}}
		},
		(*fencedv1.PipelineResult).GetSemaphore)
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// semaphoreAcquire sends an Acquire through the endpoint's pipeline (or
// unary).
func (ep *endpoint) semaphoreAcquire(ctx context.Context, req *fencedv1.SemaphoreAcquireRequest) (*fencedv1.SemaphoreAcquireResponse, error) {
	r, err := ep.semaphoreCall(ctx, &fencedv1.SemaphoreCall{Call: &fencedv1.SemaphoreCall_Acquire{Acquire: req}})
	if err == errUnary {
		return unary(ep.semaphores.Acquire(ctx, connect.NewRequest(req)))
	}
	return r.GetAcquire(), err
}

// semaphoreRelease sends a Release through the endpoint's pipeline (or
// unary).
func (ep *endpoint) semaphoreRelease(ctx context.Context, req *fencedv1.SemaphoreReleaseRequest) (*fencedv1.SemaphoreReleaseResponse, error) {
	r, err := ep.semaphoreCall(ctx, &fencedv1.SemaphoreCall{Call: &fencedv1.SemaphoreCall_Release{Release: req}})
	if err == errUnary {
		return unary(ep.semaphores.Release(ctx, connect.NewRequest(req)))
	}
	return r.GetRelease(), err
}
