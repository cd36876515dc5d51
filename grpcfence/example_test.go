package grpcfence_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/grpcfence"
	"github.com/fenced-dev/fenced/guard"
)

// notes is a one-method service, notes.Notes/Put, written by hand to keep
// the example free of generated code; a protoc-generated service is
// fenced the same way.
type notes struct {
	mu   sync.Mutex
	text map[string]string
}

// put is the handler: its write runs inside guard.Do, atomically with
// the check of the caller's token, and Do's error is returned as it is.
func (n *notes) put(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	object, _, _ := guard.TokenFrom(ctx)
	err := guard.Do(ctx, func(ctx context.Context) error {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.text[object] = in.Value
		return nil
	})
	if err != nil {
		return nil, err
	}
	return in, nil
}

var notesDesc = grpc.ServiceDesc{
	ServiceName: "notes.Notes",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Put",
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			handler := func(ctx context.Context, req any) (any, error) {
				return srv.(*notes).put(ctx, req.(*wrapperspb.StringValue))
			}
			if interceptor == nil {
				return handler(ctx, in)
			}
			return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/notes.Notes/Put"}, handler)
		},
	}},
}

func Example() {
	// Server: the interceptors validate the metadata; the handler writes
	// through Do against the watermarks in marks.
	var marks guard.Memory
	fi, err := grpcfence.New(grpcfence.Config{Guard: &marks})
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(fi.Unary), grpc.ChainStreamInterceptor(fi.Stream))
	n := &notes{text: map[string]string{}}
	srv.RegisterService(&notesDesc, n)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go srv.Serve(lis)
	defer srv.Stop()

	// Client: the interceptors send the token of the context and turn a
	// rejection back into a fence error.
	cc, err := grpc.NewClient(lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(grpcfence.UnaryClientInterceptor),
		grpc.WithStreamInterceptor(grpcfence.StreamClientInterceptor))
	if err != nil {
		panic(err)
	}
	defer cc.Close()
	put := func(t fence.Token, text string) error {
		ctx := grpcfence.WithToken(context.Background(), "notes/today", t)
		return cc.Invoke(ctx, "/notes.Notes/Put", wrapperspb.String(text), new(wrapperspb.StringValue))
	}

	fmt.Println("token 34:", put(34, "written by the current holder"))
	err = put(33, "written by a holder that paused past its lease")
	var stale *fence.StaleTokenError
	if errors.As(err, &stale) {
		fmt.Printf("token 33: %v: presented %d, required %d\n", status.Code(err), stale.Presented, stale.Required)
	}
	n.mu.Lock()
	fmt.Println(n.text["notes/today"])
	n.mu.Unlock()
	// Output:
	// token 34: <nil>
	// token 33: FailedPrecondition: presented 33, required 34
	// written by the current holder
}
