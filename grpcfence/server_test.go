package grpcfence_test

import (
	"context"
	"errors"
	"io"
	"reflect"
	"strings"
	"sync"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/grpcfence"
	"github.com/fenced-dev/fenced/guard"
)

// TestInterceptor_Statuses checks code, message, trailer and detail of
// every answer, with a client without interceptors that sets the metadata
// itself, as a client of another language would.
func TestInterceptor_Statuses(t *testing.T) {
	const maxTok = "9223372036854775807"
	type want struct {
		code     codes.Code
		msg      string
		reason   string            // ErrorInfo reason; "" for none
		info     map[string]string // ErrorInfo metadata
		required string            // x-required-token trailer
	}
	cases := []struct {
		name string
		md   []string
		want want
	}{
		{"accepted", []string{"x-fencing-token", "9", "x-resource-id", "obj", "x-fencing-issuer", "cluster-a"}, want{code: codes.OK}},
		{"equal token accepted", []string{"x-fencing-token", "9", "x-resource-id", "obj", "x-fencing-issuer", "cluster-a"}, want{code: codes.OK}},
		{"stale", []string{"x-fencing-token", "7", "x-resource-id", "obj", "x-fencing-issuer", "cluster-a"}, want{
			code:     codes.FailedPrecondition,
			msg:      `fence: stale token 7 for "obj": the object has accepted token 9; a write needs a token of at least 9`,
			reason:   "STALE_TOKEN",
			info:     map[string]string{"object": "obj", "presented": "7", "required": "9"},
			required: "9",
		}},
		{"missing token", []string{"x-resource-id", "obj", "x-fencing-issuer", "cluster-a"}, want{
			code:   codes.InvalidArgument,
			msg:    "fence: invalid token: missing x-fencing-token metadata; a call of " + methodAppend + " needs the fencing token of your grant, a decimal number from 1 to " + maxTok,
			reason: "INVALID_TOKEN",
		}},
		{"malformed token", []string{"x-fencing-token", "-3", "x-resource-id", "obj", "x-fencing-issuer", "cluster-a"}, want{
			code:   codes.InvalidArgument,
			msg:    `x-fencing-token: fence: invalid token: "-3" is not a decimal number; want digits only, 1 to ` + maxTok,
			reason: "INVALID_TOKEN",
		}},
		{"token 0", []string{"x-fencing-token", "0", "x-resource-id", "obj", "x-fencing-issuer", "cluster-a"}, want{
			code:   codes.InvalidArgument,
			msg:    "x-fencing-token: fence: invalid token: token 0 is never issued; want 1 to " + maxTok,
			reason: "INVALID_TOKEN",
		}},
		{"two tokens", []string{"x-fencing-token", "9", "x-fencing-token", "10", "x-resource-id", "obj", "x-fencing-issuer", "cluster-a"}, want{
			code:   codes.InvalidArgument,
			msg:    "fence: invalid token: 2 x-fencing-token values; send one",
			reason: "INVALID_TOKEN",
		}},
		{"missing object", []string{"x-fencing-token", "9", "x-fencing-issuer", "cluster-a"}, want{
			code:   codes.InvalidArgument,
			msg:    "missing x-resource-id metadata; send it naming the object the write is for",
			reason: "INVALID_RESOURCE",
		}},
		{"two objects", []string{"x-fencing-token", "9", "x-resource-id", "a", "x-resource-id", "b", "x-fencing-issuer", "cluster-a"}, want{
			code:   codes.InvalidArgument,
			msg:    "fence: invalid argument: 2 x-resource-id values; send one, naming the object the write is for",
			reason: "INVALID_RESOURCE",
		}},
		{"two issuers", []string{"x-fencing-token", "10", "x-resource-id", "obj", "x-fencing-issuer", "cluster-a", "x-fencing-issuer", "cluster-b"}, want{
			code:   codes.InvalidArgument,
			msg:    "fence: invalid token: 2 x-fencing-issuer values; send one",
			reason: "INVALID_TOKEN",
		}},
		{"other issuer", []string{"x-fencing-token", "10", "x-resource-id", "obj", "x-fencing-issuer", "cluster-b"}, want{
			code:   codes.PermissionDenied,
			msg:    `fence: token from another issuer: token issued by "cluster-b", this resource accepts only tokens of issuer "cluster-a"`,
			reason: "ISSUER_MISMATCH",
		}},
		{"no issuer", []string{"x-fencing-token", "10", "x-resource-id", "obj"}, want{
			code:   codes.PermissionDenied,
			msg:    `fence: token from another issuer: this resource accepts only tokens of issuer "cluster-a" and none was presented`,
			reason: "ISSUER_MISMATCH",
		}},
	}
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			ts := newServer(t, s, grpcfence.Config{Issuer: "cluster-a"})
			cc := dial(t, ts.addr, false)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					ctx := metadata.AppendToOutgoingContext(testContext(t), tc.md...)
					var trailer metadata.MD
					err := cc.Invoke(ctx, methodAppend, wrapperspb.String("v"), new(wrapperspb.StringValue), grpc.Trailer(&trailer))
					checkStatus(t, err, trailer, tc.want.code, tc.want.msg, tc.want.reason, tc.want.info, tc.want.required)
				})
			}
			if v, m := ts.o.read("obj"); v != "v,v" || m != 9 {
				t.Errorf("obj=%q, watermark %d; want two accepted writes, watermark 9", v, m)
			}
		})
	}
}

func checkStatus(t *testing.T, err error, trailer metadata.MD, code codes.Code, msg, reason string, info map[string]string, required string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != code || (code != codes.OK && st.Message() != msg) {
		t.Fatalf("status %v %q\nwant %v %q", st.Code(), st.Message(), code, msg)
	}
	var got *errdetails.ErrorInfo
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			got = ei
		}
	}
	switch {
	case reason == "" && got != nil:
		t.Errorf("unexpected ErrorInfo %v", got)
	case reason != "" && got == nil:
		t.Errorf("no ErrorInfo detail, want reason %s", reason)
	case reason != "":
		if got.Domain != "fenced.dev" || got.Reason != reason || (len(info) > 0 || len(got.Metadata) > 0) && !reflect.DeepEqual(got.Metadata, info) {
			t.Errorf("ErrorInfo{%s %s %v}, want {fenced.dev %s %v}", got.Domain, got.Reason, got.Metadata, reason, info)
		}
	}
	if r := trailer.Get("x-required-token"); (required == "" && len(r) != 0) || (required != "" && (len(r) != 1 || r[0] != required)) {
		t.Errorf("trailer x-required-token=%q, want %q", r, required)
	}
}

// TestInterceptor_Stream runs a bidirectional stream through both
// interceptors, accepted and stale.
func TestInterceptor_Stream(t *testing.T) {
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			ts := newServer(t, s, grpcfence.Config{})
			cc := dial(t, ts.addr, true)
			send := func(t *testing.T, ctx context.Context, values ...string) ([]string, error) {
				t.Helper()
				st, err := cc.NewStream(ctx, appendStreamDesc, methodAppendStream)
				if err != nil {
					return nil, err
				}
				var got []string
				for _, v := range values {
					if err := st.SendMsg(wrapperspb.String(v)); err != nil {
						break // the status comes with RecvMsg
					}
					out := new(wrapperspb.StringValue)
					if err := st.RecvMsg(out); err != nil {
						return got, err
					}
					got = append(got, out.Value)
				}
				st.CloseSend()
				if err := st.RecvMsg(new(wrapperspb.StringValue)); !errors.Is(err, io.EOF) {
					return got, err
				}
				return got, nil
			}
			ctx := grpcfence.WithToken(testContext(t), "doc", 5)
			got, err := send(t, ctx, "a", "b", "c")
			if want := []string{"a", "a,b", "a,b,c"}; err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("stream with token 5: %q, %v; want %q", got, err, want)
			}
			// A stale stream: in AroundHandler it is rejected before the
			// handler runs, in InHandler at its first write.
			_, err = send(t, grpcfence.WithToken(ctx, "doc", 3), "x")
			var se *fence.StaleTokenError
			if !errors.As(err, &se) || *se != (fence.StaleTokenError{Object: "doc", Presented: 3, Required: 5}) {
				t.Fatalf("stale stream: err=%v, want StaleTokenError{doc 3 5}", err)
			}
			if status.Code(err) != codes.FailedPrecondition {
				t.Errorf("status.Code=%v, want FailedPrecondition", status.Code(err))
			}
			_, err = send(t, testContext(t), "x")
			if !errors.Is(err, fence.ErrInvalidToken) {
				t.Fatalf("stream without a token: err=%v, want ErrInvalidToken", err)
			}
			if v, m := ts.o.read("doc"); v != "a,b,c" || m != 5 {
				t.Errorf("doc=%q, watermark %d; want a,b,c and 5", v, m)
			}
		})
	}
}

// TestInterceptor_Fenced checks that methods not fenced pass through, and
// that by default every method is fenced, the health service included.
func TestInterceptor_Fenced(t *testing.T) {
	ts := newServer(t, setups[0], grpcfence.Config{
		Fenced: func(m string) bool { return !strings.HasPrefix(m, "/grpc.health.v1.Health/") },
	})
	hc := grpc_health_v1.NewHealthClient(dial(t, ts.addr, true))
	if _, err := hc.Check(testContext(t), &grpc_health_v1.HealthCheckRequest{}); err != nil {
		t.Fatalf("health check (not fenced): %v", err)
	}
	if _, err := appendValue(testContext(t), dial(t, ts.addr, true), "", 0, "v"); !errors.Is(err, fence.ErrInvalidToken) {
		t.Fatalf("Append without a token: %v, want ErrInvalidToken", err)
	}

	all := newServer(t, setups[0], grpcfence.Config{})
	hc = grpc_health_v1.NewHealthClient(dial(t, all.addr, true))
	_, err := hc.Check(testContext(t), &grpc_health_v1.HealthCheckRequest{})
	if !errors.Is(err, fence.ErrInvalidToken) || status.Code(err) != codes.InvalidArgument {
		t.Fatalf("health check with every method fenced: %v, want InvalidArgument matching ErrInvalidToken", err)
	}
}

func TestInterceptor_Resolve(t *testing.T) {
	ts := newServer(t, setups[0], grpcfence.Config{
		Resolve: func(ctx context.Context, method string) string { return "by-method:" + method },
	})
	cc := dial(t, ts.addr, true)
	if _, err := appendValue(testContext(t), cc, "", 4, "v"); err != nil {
		t.Fatalf("Append without x-resource-id: %v", err)
	}
	if _, m := ts.o.read("by-method:" + methodAppend); m != 4 {
		t.Fatalf("watermark of the resolved object=%d, want 4", m)
	}
}

// TestInterceptor_AroundHandlerError checks that a handler's error passes
// through unchanged and leaves the watermark where it was.
func TestInterceptor_AroundHandlerError(t *testing.T) {
	ts := newServer(t, setups[1], grpcfence.Config{})
	cc := dial(t, ts.addr, true)
	ctx := testContext(t)
	if _, err := appendValue(ctx, cc, "obj", 5, "ok"); err != nil {
		t.Fatal(err)
	}
	_, err := appendValue(ctx, cc, "obj", 8, "fail")
	if st := status.Convert(err); st.Code() != codes.Unavailable || st.Message() != "disk full" {
		t.Fatalf("failing handler: %v, want the handler's Unavailable \"disk full\"", err)
	}
	if _, m := ts.o.read("obj"); m != 5 {
		t.Fatalf("watermark=%d after a failed handler, want 5", m)
	}
}

// TestInterceptor_AroundHandlerSerializes sends concurrent calls for one
// object to a handler that does an unprotected read-modify-write: in
// AroundHandler mode no two may overlap and no update may be lost (the
// race detector watches the counter too).
func TestInterceptor_AroundHandlerSerializes(t *testing.T) {
	ts := newServer(t, setups[1], grpcfence.Config{})
	cc := dial(t, ts.addr, true)
	const calls = 64
	var mu sync.Mutex
	accepted, stale := 0, 0
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := grpcfence.WithToken(testContext(t), "counter", fence.Token(1+i%8))
			err := cc.Invoke(ctx, methodIncr, &wrapperspb.StringValue{}, new(wrapperspb.StringValue))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				accepted++
			case errors.Is(err, fence.ErrStaleToken):
				stale++
			default:
				t.Errorf("Incr: %v", err)
			}
		}()
	}
	wg.Wait()
	ts.o.marks.Check(context.Background(), "sync", 1) // a happens-before edge for reading counter
	if ts.impl.overlaps != 0 {
		t.Errorf("%d handlers ran while another held the object", ts.impl.overlaps)
	}
	if ts.impl.counter != accepted || accepted+stale != calls {
		t.Errorf("counter=%d, accepted %d, stale %d; want counter = accepted and %d calls", ts.impl.counter, accepted, stale, calls)
	}
}

// TestInterceptor_NoGuard checks that guard.Do behind interceptors without
// a Guard reports guard.ErrNoGuard.
func TestInterceptor_NoGuard(t *testing.T) {
	fi, err := grpcfence.New(grpcfence.Config{}) // no Guard
	if err != nil {
		t.Fatal(err)
	}
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-fencing-token", "1", "x-resource-id", "o"))
	var got error
	fi.Unary(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/s/M"}, func(ctx context.Context, req any) (any, error) {
		got = guard.Do(ctx, func(context.Context) error { return nil })
		return nil, nil
	})
	if !errors.Is(got, guard.ErrNoGuard) {
		t.Errorf("guard.Do without a Guard=%v, want guard.ErrNoGuard", got)
	}
}

func TestConfig_Validate(t *testing.T) {
	if _, err := grpcfence.New(grpcfence.Config{Mode: guard.AroundHandler}); err == nil {
		t.Error("New(AroundHandler without a Guard) succeeded, want an error")
	}
	if _, err := grpcfence.New(grpcfence.Config{Mode: 9}); err == nil {
		t.Error("New(unknown mode) succeeded, want an error")
	}
}

func TestError(t *testing.T) {
	already := status.Error(codes.Aborted, "mine")
	other := errors.New("other")
	for _, tc := range []struct {
		name   string
		err    error
		code   codes.Code
		reason string
	}{
		{"stale", &fence.StaleTokenError{Object: "o", Presented: 1, Required: 2}, codes.FailedPrecondition, "STALE_TOKEN"},
		{"bare stale", fence.ErrStaleToken, codes.FailedPrecondition, "STALE_TOKEN"},
		{"invalid", errors.Join(errors.New("x"), fence.ErrInvalidToken), codes.InvalidArgument, "INVALID_TOKEN"},
		{"issuer", fence.ErrIssuerMismatch, codes.PermissionDenied, "ISSUER_MISMATCH"},
		{"a status stays", already, codes.Aborted, ""},
		{"other stays", other, codes.Unknown, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := grpcfence.Error(tc.err)
			st := status.Convert(got)
			if st.Code() != tc.code {
				t.Fatalf("code=%v, want %v", st.Code(), tc.code)
			}
			if tc.reason == "" {
				if got != tc.err {
					t.Fatalf("Error(%v)=%v, want it unchanged", tc.err, got)
				}
				return
			}
			if ei, ok := st.Details()[0].(*errdetails.ErrorInfo); !ok || ei.Reason != tc.reason || st.Message() != tc.err.Error() {
				t.Fatalf("status %v %v, want reason %s and message %q", st.Message(), st.Details(), tc.reason, tc.err.Error())
			}
		})
	}
	if grpcfence.Error(nil) != nil {
		t.Error("Error(nil) != nil")
	}
}
