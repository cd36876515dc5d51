package grpcfence_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/grpcfence"
)

// rawServer answers every call with the status and trailer of the
// method's entry in answers, and records the metadata it received: a
// server that knows the convention only from its description.
type rawServer struct {
	mu      sync.Mutex
	md      metadata.MD
	answers map[string]answer
}

type answer struct {
	st      *status.Status
	trailer metadata.MD
}

func newRawServer(t *testing.T, answers map[string]answer) (*rawServer, string) {
	t.Helper()
	rs := &rawServer{answers: answers}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		method, _ := grpc.MethodFromServerStream(stream)
		md, _ := metadata.FromIncomingContext(stream.Context())
		rs.mu.Lock()
		rs.md = md
		rs.mu.Unlock()
		a, ok := rs.answers[method]
		if !ok {
			var in wrapperspb.StringValue
			stream.RecvMsg(&in)
			return stream.SendMsg(&in)
		}
		stream.SetTrailer(a.trailer)
		return a.st.Err()
	}))
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return rs, lis.Addr().String()
}

func (rs *rawServer) received() metadata.MD {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.md
}

// withInfo returns a status with an ErrorInfo of this package's domain.
func withInfo(t *testing.T, c codes.Code, msg, reason string, md map[string]string) *status.Status {
	return detailed(t, "fenced.dev", c, msg, reason, md)
}

func detailed(t *testing.T, domain string, c codes.Code, msg, reason string, md map[string]string) *status.Status {
	st, err := status.New(c, msg).WithDetails(&errdetails.ErrorInfo{Domain: domain, Reason: reason, Metadata: md})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestClient_Metadata(t *testing.T) {
	rs, addr := newRawServer(t, nil)
	cc := dial(t, addr, true)
	invoke := func(ctx context.Context) {
		t.Helper()
		if err := cc.Invoke(ctx, "/s.S/Echo", wrapperspb.String("x"), new(wrapperspb.StringValue)); err != nil {
			t.Fatal(err)
		}
	}
	ctx := metadata.AppendToOutgoingContext(testContext(t), "x-fencing-token", "1", "other", "kept")
	ctx = grpcfence.WithIssuer(grpcfence.WithToken(ctx, "orders/7", 42), "cluster-a")
	invoke(ctx)
	md := rs.received()
	for k, want := range map[string]string{"x-fencing-token": "42", "x-resource-id": "orders/7", "x-fencing-issuer": "cluster-a", "other": "kept"} {
		if vs := md.Get(k); len(vs) != 1 || vs[0] != want {
			t.Errorf("server got %s=%q, want [%q]", k, vs, want)
		}
	}
	invoke(grpcfence.WithToken(ctx, "", 43))
	if md := rs.received(); md.Get("x-fencing-token")[0] != "43" || md.Get("x-fencing-issuer")[0] != "cluster-a" || len(md.Get("x-resource-id")) != 0 {
		t.Errorf("second call metadata %v, want token 43, issuer kept, no x-resource-id", md)
	}
	invoke(testContext(t))
	if md := rs.received(); len(md.Get("x-fencing-token")) != 0 {
		t.Errorf("call without a token sent %v", md)
	}
}

func TestClient_Errors(t *testing.T) {
	_, addr := newRawServer(t, map[string]answer{
		"/s.S/Stale": {st: withInfo(t, codes.FailedPrecondition, "stale", "STALE_TOKEN",
			map[string]string{"object": "server-obj", "presented": "6", "required": "11"})},
		"/s.S/TrailerOnly": {st: status.New(codes.FailedPrecondition, "stale, required 12"),
			trailer: metadata.Pairs("x-required-token", "12")},
		"/s.S/StaleNoRequired": {st: withInfo(t, codes.FailedPrecondition, "stale", "STALE_TOKEN", nil)},
		"/s.S/Precondition":    {st: status.New(codes.FailedPrecondition, "not ready")},
		"/s.S/Invalid":         {st: withInfo(t, codes.InvalidArgument, "bad token", "INVALID_TOKEN", nil)},
		"/s.S/Resource":        {st: withInfo(t, codes.InvalidArgument, "no object", "INVALID_RESOURCE", nil)},
		"/s.S/AppInvalid":      {st: status.New(codes.InvalidArgument, "name too long")},
		"/s.S/Issuer":          {st: withInfo(t, codes.PermissionDenied, "other cluster", "ISSUER_MISMATCH", nil)},
		"/s.S/OtherDomain":     {st: detailed(t, "example.com", codes.PermissionDenied, "no", "ISSUER_MISMATCH", nil)},
	})
	cc := dial(t, addr, true)
	ctx := grpcfence.WithToken(testContext(t), "my-obj", 6)
	call := func(m string) error {
		return cc.Invoke(ctx, "/s.S/"+m, wrapperspb.String("x"), new(wrapperspb.StringValue))
	}
	stale := func(t *testing.T, err error, want fence.StaleTokenError) {
		t.Helper()
		var se *fence.StaleTokenError
		if !errors.As(err, &se) || *se != want {
			t.Fatalf("err=%v, want StaleTokenError%+v", err, want)
		}
		if status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("status.Code=%v, want FailedPrecondition kept", status.Code(err))
		}
	}
	t.Run("stale from the detail", func(t *testing.T) {
		stale(t, call("Stale"), fence.StaleTokenError{Object: "server-obj", Presented: 6, Required: 11})
	})
	t.Run("stale from the trailer", func(t *testing.T) {
		stale(t, call("TrailerOnly"), fence.StaleTokenError{Object: "my-obj", Presented: 6, Required: 12})
	})
	t.Run("stale without a required token", func(t *testing.T) {
		err := call("StaleNoRequired")
		var se *fence.StaleTokenError
		if !errors.Is(err, fence.ErrStaleToken) || errors.As(err, &se) {
			t.Fatalf("err=%v, want ErrStaleToken without a StaleTokenError", err)
		}
	})
	for _, tc := range []struct {
		method string
		want   error
		code   codes.Code
	}{
		{"Invalid", fence.ErrInvalidToken, codes.InvalidArgument},
		{"Resource", fence.ErrInvalidArgument, codes.InvalidArgument},
		{"Issuer", fence.ErrIssuerMismatch, codes.PermissionDenied},
	} {
		t.Run(tc.method, func(t *testing.T) {
			err := call(tc.method)
			if !errors.Is(err, tc.want) || status.Code(err) != tc.code {
				t.Fatalf("err=%v (code %v), want %v with code %v", err, status.Code(err), tc.want, tc.code)
			}
		})
	}
	for _, m := range []string{"Precondition", "AppInvalid", "OtherDomain"} {
		t.Run(m+" is not a fencing error", func(t *testing.T) {
			err := call(m)
			if errors.Is(err, fence.ErrStaleToken) || errors.Is(err, fence.ErrInvalidToken) || errors.Is(err, fence.ErrIssuerMismatch) || errors.Is(err, fence.ErrInvalidArgument) {
				t.Fatalf("err=%v was mapped to a fencing error", err)
			}
			if status.Code(err) == codes.OK || status.Code(err) == codes.Unknown {
				t.Fatalf("err=%v lost its status", err)
			}
		})
	}
	t.Run("stream", func(t *testing.T) {
		st, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/s.S/TrailerOnly")
		if err != nil {
			t.Fatal(err)
		}
		stale(t, st.RecvMsg(new(wrapperspb.StringValue)), fence.StaleTokenError{Object: "my-obj", Presented: 6, Required: 12})
	})
}

// TestError_RoundTrip sends every fence error through Error on a server
// and the client interceptor: the client gets the same fence error, with
// the fields of its concrete type, and keeps the status.
func TestError_RoundTrip(t *testing.T) {
	stale := &fence.StaleTokenError{Object: "orders/7", Presented: 3, Required: 9}
	version := &fence.VersionMismatchError{Object: "k", Expected: 4, Current: 6}
	errs := map[string]error{"Stale": stale, "Version": version}
	for _, s := range []error{fence.ErrInvalidArgument, fence.ErrInvalidToken, fence.ErrIssuerMismatch,
		fence.ErrSessionNotFound, fence.ErrNotGranted, fence.ErrLockLost, fence.ErrTokenOverflow, fence.ErrNotLeader} {
		errs[strings.ReplaceAll(s.Error(), " ", "_")] = fmt.Errorf("%w: because", s)
	}
	answers := map[string]answer{}
	for m, err := range errs {
		answers["/s.S/"+m] = answer{st: status.Convert(grpcfence.Error(err))}
	}
	_, addr := newRawServer(t, answers)
	cc := dial(t, addr, true)
	ctx := grpcfence.WithToken(testContext(t), "sent", 1)
	for m, want := range errs {
		t.Run(m, func(t *testing.T) {
			err := cc.Invoke(ctx, "/s.S/"+m, wrapperspb.String("x"), new(wrapperspb.StringValue))
			if status.Code(err) != status.Code(grpcfence.Error(want)) {
				t.Fatalf("code %v, want %v", status.Code(err), status.Code(grpcfence.Error(want)))
			}
			var se *fence.StaleTokenError
			var vm *fence.VersionMismatchError
			switch {
			case want == stale:
				if !errors.As(err, &se) || *se != *stale {
					t.Fatalf("err=%v, want %+v", err, stale)
				}
			case want == version:
				if !errors.As(err, &vm) || *vm != *version || !errors.Is(err, fence.ErrVersionMismatch) {
					t.Fatalf("err=%v, want %+v", err, version)
				}
			default:
				if !errors.Is(err, errors.Unwrap(want)) || errors.As(err, &se) || errors.As(err, &vm) {
					t.Fatalf("err=%v, want %v", err, errors.Unwrap(want))
				}
			}
		})
	}
}
