package client

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// serializedCall sends call, serialized, of kind through the endpoint's
// pipeline in the PipelineCall that wrap makes of the bytes, and decodes
// the bytes field returns of the answer into res; when the endpoint's
// Pipeline does not take that kind (or has not said yet) it returns
// errUnary for the caller to send the call unary. It serves the calls
// whose messages fenced.proto cannot name (queue.proto, semaphore.proto
// and rwlock.proto import it).
func (ep *endpoint) serializedCall(ctx context.Context, kind fencedv1.PipelineCallKind, call, res proto.Message, wrap func([]byte) *fencedv1.PipelineCall, field func(*fencedv1.PipelineResult) []byte) error {
	raw, err := proto.Marshal(call)
	if err != nil {
		return err
	}
	r, taken, err := ep.pipe.callKind(ctx, kind, wrap(raw))
	if !taken {
		return errUnary
	}
	if err != nil {
		return err
	}
	if err := proto.Unmarshal(field(r), res); err != nil {
		return connect.NewError(connect.CodeInternal, fmt.Errorf("the pipelined call's answer is not a %s: %w", res.ProtoReflect().Descriptor().Name(), err))
	}
	return nil
}

// errUnary tells a call to go unary.
var errUnary = errors.New("client: the server's Pipeline does not take this call")
