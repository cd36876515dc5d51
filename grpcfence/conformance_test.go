package grpcfence_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/grpcfence"
	"github.com/fenced-dev/fenced/guard/guardtest"
)

// grpcTarget drives the conformance suite through real gRPC: writes go
// from the client interceptors to the server interceptors and the handler,
// which appends under the guard's atomic step; reads look at the resource
// directly.
type grpcTarget struct {
	ts *testServer
	cc *grpc.ClientConn
}

func (g *grpcTarget) Write(ctx context.Context, object string, t fence.Token, value string) error {
	_, err := appendValue(ctx, g.cc, object, t, value)
	return err
}

func (g *grpcTarget) Read(ctx context.Context, object string) (string, fence.Token, error) {
	v, m := g.ts.o.read(object)
	return v, m, nil
}

func (g *grpcTarget) Appends() bool { return true }

var _ guardtest.Appender = (*grpcTarget)(nil)

func TestInterceptor_Conformance(t *testing.T) {
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			guardtest.Run(t, func(t *testing.T) guardtest.Target {
				ts := newServer(t, s, grpcfence.Config{})
				return &grpcTarget{ts: ts, cc: dial(t, ts.addr, true)}
			})
		})
	}
}
