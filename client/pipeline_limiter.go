package client

import (
	"context"

	"connectrpc.com/connect"

	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// Limiter takes ride the endpoint's pipeline (PipelineCall.limiter_take)
// when the server's Pipeline names PIPELINE_CALL_KIND_LIMITER in its
// first response, as queue calls do (pipeline_queue.go); otherwise, and
// before that response arrived, they go unary. Config and Describe are
// always unary.

// limiterTake sends a Take through ep's pipeline (or unary).
func (c *Client) limiterTake(ctx context.Context, ep *endpoint, req *fencedv1.LimiterTakeRequest) (*fencedv1.LimiterTakeResponse, error) {
	r, taken, err := ep.pipe.callKind(ctx, fencedv1.PipelineCallKind_PIPELINE_CALL_KIND_LIMITER, &fencedv1.PipelineCall{Call: &fencedv1.PipelineCall_LimiterTake{LimiterTake: req}})
	if !taken {
		return unary(c.limiters(ep).Take(ctx, connect.NewRequest(req)))
	}
	if err != nil {
		return nil, err
	}
	return r.GetLimiterTake(), nil
}
