package grpcfence_test

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/grpcfence"
	"github.com/fenced-dev/fenced/guard"
)

// The test service, written by hand (no protoc): grpcfence.test.Objects
// with Append (unary), AppendStream (bidirectional) and Incr (unary, an
// unsynchronized read-modify-write), all on wrapperspb.StringValue.
const service = "grpcfence.test.Objects"

const (
	methodAppend       = "/" + service + "/Append"
	methodAppendStream = "/" + service + "/AppendStream"
	methodIncr         = "/" + service + "/Incr"
)

var objectsDesc = grpc.ServiceDesc{
	ServiceName: service,
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Append", Handler: unaryHandler(methodAppend, (*objectsServer).append)},
		{MethodName: "Incr", Handler: unaryHandler(methodIncr, (*objectsServer).incr)},
	},
	Streams: []grpc.StreamDesc{
		{StreamName: "AppendStream", Handler: appendStream, ServerStreams: true, ClientStreams: true},
	},
}

var appendStreamDesc = &objectsDesc.Streams[0]

func unaryHandler(method string, m func(*objectsServer, context.Context, *wrapperspb.StringValue) (*wrapperspb.StringValue, error)) func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error) {
	return func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		in := new(wrapperspb.StringValue)
		if err := dec(in); err != nil {
			return nil, err
		}
		h := func(ctx context.Context, req any) (any, error) {
			return m(srv.(*objectsServer), ctx, req.(*wrapperspb.StringValue))
		}
		if interceptor == nil {
			return h(ctx, in)
		}
		return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: method}, h)
	}
}

// objects is the protected resource: values per object, appended to, with
// their watermarks in a guard.Memory.
type objects struct {
	marks  guard.Memory
	mu     sync.Mutex
	values map[string]string
}

func (o *objects) append(object, value string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if v := o.values[object]; v != "" {
		value = v + "," + value
	}
	o.values[object] = value
	return value
}

func (o *objects) read(object string) (string, fence.Token) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.values[object], o.marks.Watermark(object)
}

// objectsServer implements the test service; with useDo it writes through
// guard.Do, else directly (relying on AroundHandler).
type objectsServer struct {
	o     *objects
	useDo bool
	// counter, inflight and overlaps belong to Incr.
	counter            int
	inflight, overlaps int32
	incrMu             sync.Mutex // guards inflight and overlaps only
}

func (s *objectsServer) write(ctx context.Context, value string) (string, error) {
	object, _, ok := guard.TokenFrom(ctx)
	if !ok {
		return "", status.Error(codes.Internal, "not fenced")
	}
	var out string
	w := func(context.Context) error {
		out = s.o.append(object, value)
		return nil
	}
	var err error
	if s.useDo {
		err = guard.Do(ctx, w)
	} else {
		err = w(ctx)
	}
	return out, err
}

func (s *objectsServer) append(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	if in.Value == "fail" {
		return nil, status.Error(codes.Unavailable, "disk full")
	}
	out, err := s.write(ctx, in.Value)
	if err != nil {
		return nil, err // the interceptor turns fencing errors into statuses
	}
	return wrapperspb.String(out), nil
}

func (s *objectsServer) incr(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	s.incrMu.Lock()
	s.inflight++
	if s.inflight > 1 {
		s.overlaps++
	}
	s.incrMu.Unlock()
	v := s.counter // deliberately unsynchronized: the interceptor is the lock
	time.Sleep(200 * time.Microsecond)
	s.counter = v + 1
	s.incrMu.Lock()
	s.inflight--
	s.incrMu.Unlock()
	return &wrapperspb.StringValue{}, nil
}

func appendStream(srv any, stream grpc.ServerStream) error {
	s := srv.(*objectsServer)
	for {
		in := new(wrapperspb.StringValue)
		err := stream.RecvMsg(in)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		out, err := s.write(stream.Context(), in.Value)
		if err != nil {
			return err
		}
		if err := stream.SendMsg(wrapperspb.String(out)); err != nil {
			return err
		}
	}
}

// setup is one way to wire the interceptors and the handler.
type setup struct {
	name  string
	mode  guard.Mode
	useDo bool
}

var setups = []setup{
	{"InHandler+Do", guard.InHandler, true},
	{"AroundHandler", guard.AroundHandler, false},
	{"AroundHandler+Do", guard.AroundHandler, true},
}

// testServer is a real gRPC server on 127.0.0.1 with the test service and
// the health service behind the fencing interceptors.
type testServer struct {
	o    *objects
	impl *objectsServer
	addr string
}

// newServer starts a testServer; wrap, if given, wraps the objects'
// guard (in guard.Signed, say).
func newServer(t *testing.T, s setup, cfg grpcfence.Config, wrap ...func(fence.Guard) fence.Guard) *testServer {
	t.Helper()
	ts := &testServer{o: &objects{values: map[string]string{}}}
	ts.impl = &objectsServer{o: ts.o, useDo: s.useDo}
	cfg.Guard = &ts.o.marks
	for _, w := range wrap {
		cfg.Guard = w(cfg.Guard)
	}
	cfg.Mode = s.mode
	fi, err := grpcfence.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(fi.Unary), grpc.ChainStreamInterceptor(fi.Stream))
	srv.RegisterService(&objectsDesc, ts.impl)
	grpc_health_v1.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	ts.addr = lis.Addr().String()
	return ts
}

// dial connects to addr, with the client interceptors when fenced.
func dial(t *testing.T, addr string, fenced bool) *grpc.ClientConn {
	t.Helper()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if fenced {
		opts = append(opts,
			grpc.WithUnaryInterceptor(grpcfence.UnaryClientInterceptor),
			grpc.WithStreamInterceptor(grpcfence.StreamClientInterceptor))
	}
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// appendValue calls Append with token t for object.
func appendValue(ctx context.Context, cc *grpc.ClientConn, object string, t fence.Token, value string) (string, error) {
	ctx = grpcfence.WithToken(ctx, object, t)
	out := new(wrapperspb.StringValue)
	err := cc.Invoke(ctx, methodAppend, wrapperspb.String(value), out)
	return out.Value, err
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
