package server

import (
	"context"

	"google.golang.org/protobuf/proto"

	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// runRWLock performs a pipelined read/write lock call: raw is a
// serialized RWLockCall; the answer carries a serialized RWLockResult.
func (p *pipeline) runRWLock(ctx context.Context, id uint64, raw []byte) *fencedv1.PipelineResult {
	var call fencedv1.RWLockCall
	return p.runSerialized(ctx, id, raw, &call, func() (pipelinedCall, bool) {
		switch c := call.GetCall().(type) {
		case *fencedv1.RWLockCall_Acquire:
			return unaryCall(c.Acquire, p.rwlocks.Acquire, func(r *fencedv1.RWAcquireResponse) proto.Message {
				return &fencedv1.RWLockResult{Result: &fencedv1.RWLockResult_Acquire{Acquire: r}}
			}), true
		case *fencedv1.RWLockCall_Release:
			return unaryCall(c.Release, p.rwlocks.Release, func(r *fencedv1.RWReleaseResponse) proto.Message {
				return &fencedv1.RWLockResult{Result: &fencedv1.RWLockResult_Release{Release: r}}
			}), true
		}
		return pipelinedCall{}, false
	}, func(out []byte) *fencedv1.PipelineResult {
		return &fencedv1.PipelineResult{Id: id, Result: &fencedv1.PipelineResult_Rwlock{Rwlock: out}}
	})
}
