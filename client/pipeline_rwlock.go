package client

import (
	"context"

	"connectrpc.com/connect"

	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// Read/write lock acquires and releases ride the endpoint's pipeline
// (PipelineCall.rwlock carries a serialized RWLockCall) when the server's
// Pipeline names PIPELINE_CALL_KIND_RWLOCK in its first response, as
// semaphore calls do (pipeline_semaphore.go); otherwise they go unary.
// Verify and Describe are always unary.

// rwlockCall sends a read/write lock call through the endpoint's pipeline
// and returns its answer, or errUnary.
func (ep *endpoint) rwlockCall(ctx context.Context, call *fencedv1.RWLockCall) (*fencedv1.RWLockResult, error) {
	var res fencedv1.RWLockResult
	err := ep.serializedCall(ctx, fencedv1.PipelineCallKind_PIPELINE_CALL_KIND_RWLOCK, call, &res,
		func(raw []byte) *fencedv1.PipelineCall {
			return &fencedv1.PipelineCall{Call: &fencedv1.PipelineCall_Rwlock{Rwlock: raw}}
		},
		(*fencedv1.PipelineResult).GetRwlock)
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// rwlockAcquire sends an Acquire through the endpoint's pipeline (or
// unary).
func (ep *endpoint) rwlockAcquire(ctx context.Context, req *fencedv1.RWAcquireRequest) (*fencedv1.RWAcquireResponse, error) {
	r, err := ep.rwlockCall(ctx, &fencedv1.RWLockCall{Call: &fencedv1.RWLockCall_Acquire{Acquire: req}})
	if err == errUnary {
		return unary(ep.rwlocks.Acquire(ctx, connect.NewRequest(req)))
	}
	return r.GetAcquire(), err
}

// rwlockRelease sends a Release through the endpoint's pipeline (or
// unary).
func (ep *endpoint) rwlockRelease(ctx context.Context, req *fencedv1.RWReleaseRequest) (*fencedv1.RWReleaseResponse, error) {
	r, err := ep.rwlockCall(ctx, &fencedv1.RWLockCall{Call: &fencedv1.RWLockCall_Release{Release: req}})
	if err == errUnary {
		return unary(ep.rwlocks.Release(ctx, connect.NewRequest(req)))
	}
	return r.GetRelease(), err
}
