package wire_test

import (
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/grpc/codes"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/grpcfence"
	"github.com/fenced-dev/fenced/httpfence"
	"github.com/fenced-dev/fenced/internal/wire"
)

// sentinels are every error of package fence a rejection may stand for.
var sentinels = []error{
	fence.ErrInvalidArgument, fence.ErrInvalidToken, fence.ErrStaleToken,
	fence.ErrIssuerMismatch, fence.ErrSessionNotFound, fence.ErrNotGranted,
	fence.ErrLockLost, fence.ErrTokenOverflow, fence.ErrNotLeader, fence.ErrLimitExceeded,
	fence.ErrVersionMismatch, fence.ErrNotOwner, fence.ErrPermissionDenied, fence.ErrScopeMismatch,
}

// roundTrip encodes err, carries the rejection in HTTP headers as the
// Connect API does, and decodes it.
func roundTrip(t *testing.T, err error, call wire.Call) (wire.Rejection, error) {
	t.Helper()
	r, ok := wire.Encode(err)
	if !ok {
		t.Fatalf("Encode(%v) found no fence error", err)
	}
	h := make(http.Header)
	r.SetHeader(h)
	got := wire.FromHeader(r.Code, r.Message, h)
	if !reflect.DeepEqual(got, r) {
		t.Fatalf("through headers %+v, want %+v", got, r)
	}
	return r, got.Err(call)
}

func TestRoundTrip_Sentinels(t *testing.T) {
	for _, s := range sentinels {
		t.Run(s.Error(), func(t *testing.T) {
			err := fmt.Errorf("%w: because", s)
			r, got := roundTrip(t, err, wire.Call{})
			if !errors.Is(got, s) || got.Error() != err.Error() {
				t.Fatalf("decoded %v (%q), want one matching %v reading %q", got, got, s, err)
			}
			for _, other := range sentinels {
				if other != s && errors.Is(got, other) && !(s == fence.ErrInvalidToken && other == fence.ErrInvalidArgument) {
					t.Errorf("decoded %v also matches %v", got, other)
				}
			}
			if r.Fields != nil {
				t.Errorf("fields %v for a sentinel", r.Fields)
			}
		})
	}
}

func TestRoundTrip_StaleToken(t *testing.T) {
	want := fence.StaleTokenError{Object: "orders/7", Presented: 3, Required: 9}
	r, got := roundTrip(t, fmt.Errorf("put: %w", &want), wire.Call{Object: "other", Token: 1})
	var se *fence.StaleTokenError
	if !errors.As(got, &se) || *se != want || !errors.Is(got, fence.ErrStaleToken) {
		t.Fatalf("decoded %v, want %+v", got, want)
	}
	if r.Code != wire.CodeFailedPrecondition || r.Reason != wire.ReasonStaleToken {
		t.Fatalf("encoded %v %q", r.Code, r.Reason)
	}
}

// A scope mismatch keeps the scope the token belongs to (or that it
// belongs to none) and the scope the write needed, as X-Token-Kind,
// X-Token-Scope and X-Required-Scope.
func TestRoundTrip_ScopeMismatch(t *testing.T) {
	for _, want := range []fence.ScopeMismatchError{
		{Object: "a", Required: "a", Presented: 7, Kind: fence.KindLock, Scope: "b"},
		{Object: "cache/1", Required: "orders", Presented: 9, Kind: fence.KindPermit, Scope: "orders2/3"},
		{Object: "a", Required: "a", Presented: 3}, // no live grant
	} {
		r, got := roundTrip(t, fmt.Errorf("put: %w", &want), wire.Call{Object: "other", Token: 1})
		var sm *fence.ScopeMismatchError
		if !errors.As(got, &sm) || *sm != want || !errors.Is(got, fence.ErrScopeMismatch) {
			t.Fatalf("decoded %v, want %+v", got, want)
		}
		if r.Code != wire.CodePermissionDenied || r.Reason != wire.ReasonScopeMismatch {
			t.Fatalf("encoded %v %q", r.Code, r.Reason)
		}
		h := make(http.Header)
		r.SetHeader(h)
		if h.Get(wire.HeaderScope) != want.Scope || h.Get(wire.HeaderKind) != string(want.Kind) || h.Get(wire.HeaderRequiredScope) != want.Required {
			t.Fatalf("headers %v for %+v", h, want)
		}
	}
}

func TestRoundTrip_VersionMismatch(t *testing.T) {
	for _, want := range []fence.VersionMismatchError{
		{Object: "k", Expected: 4, Current: 6},
		{Object: "k", Expected: 2, Current: 0}, // it does not exist
		{Object: "k", Expected: 0, Current: 1}, // it must not exist
	} {
		_, got := roundTrip(t, &want, wire.Call{})
		var vm *fence.VersionMismatchError
		if !errors.As(got, &vm) || *vm != want || !errors.Is(got, fence.ErrVersionMismatch) || got.Error() != want.Error() {
			t.Errorf("decoded %v, want %+v", got, want)
		}
	}
}

// A server may send fewer fields than the SDK knows: the call fills what
// it can, and a rejection without its required token stays a bare stale
// token rather than one with a made-up watermark.
func TestDecode_Fallbacks(t *testing.T) {
	call := wire.Call{Object: "sent", Token: 5}
	only := wire.Rejection{Code: wire.CodeFailedPrecondition, Reason: wire.ReasonStaleToken, Fields: map[string]string{wire.FieldRequired: "8"}}
	var se *fence.StaleTokenError
	if err := only.Err(call); !errors.As(err, &se) || *se != (fence.StaleTokenError{Object: "sent", Presented: 5, Required: 8}) {
		t.Errorf("only the required token: %v", err)
	}
	for _, fields := range []map[string]string{nil, {wire.FieldRequired: "x"}, {wire.FieldRequired: "0"}} {
		r := wire.Rejection{Code: wire.CodeFailedPrecondition, Reason: wire.ReasonStaleToken, Message: "stale", Fields: fields}
		if err := r.Err(call); !errors.Is(err, fence.ErrStaleToken) || errors.As(err, &se) || err.Error() != "stale" {
			t.Errorf("fields %v: %v, want a bare stale token", fields, err)
		}
	}
	r := wire.Rejection{Code: wire.CodeAborted, Reason: wire.ReasonVersionMismatch, Fields: map[string]string{wire.FieldCurrent: "3"}}
	var vm *fence.VersionMismatchError
	if err := r.Err(call); !errors.Is(err, fence.ErrVersionMismatch) || errors.As(err, &vm) {
		t.Errorf("no expected version: %v, want a bare version mismatch", err)
	}
}

func TestDecode_NotAFenceError(t *testing.T) {
	for _, r := range []wire.Rejection{
		{Code: wire.CodeInvalidArgument},                                        // no reason
		{Code: wire.CodeInvalidArgument, Reason: "made-up"},                     // unknown reason
		{Code: wire.CodeUnavailable, Reason: wire.ReasonStaleToken},             // code of another reason
		{Code: wire.CodeFailedPrecondition, Reason: wire.ReasonInvalidArgument}, // likewise
	} {
		if err := r.Err(wire.Call{}); err != nil {
			t.Errorf("%+v decoded to %v, want nil", r, err)
		}
	}
	if _, ok := wire.Encode(errors.New("other")); ok {
		t.Error("Encode(other error) found a fence error")
	}
	if _, ok := wire.Encode(nil); ok {
		t.Error("Encode(nil) found a fence error")
	}
}

func TestDecode_InvalidResource(t *testing.T) {
	r := wire.Rejection{Code: wire.CodeInvalidArgument, Reason: wire.ReasonInvalidResource, Message: "no object"}
	if err := r.Err(wire.Call{}); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Fatalf("invalid resource decoded to %v", err)
	}
}

func TestByCode(t *testing.T) {
	for c, want := range map[wire.Code]error{
		wire.CodeInvalidArgument: fence.ErrInvalidArgument,
		wire.CodeNotFound:        fence.ErrSessionNotFound,
	} {
		r := wire.Rejection{Code: c, Reason: wire.ByCode(c), Message: "m"}
		if err := r.Err(wire.Call{}); !errors.Is(err, want) {
			t.Errorf("code %d decoded to %v, want %v", c, err, want)
		}
	}
	for _, c := range []wire.Code{wire.CodeUnavailable, wire.CodeAborted, wire.CodeFailedPrecondition, wire.CodeResourceExhausted, wire.CodePermissionDenied} {
		if got := wire.ByCode(c); got != "" {
			t.Errorf("ByCode(%d)=%q, want none", c, got)
		}
	}
}

// The codes are gRPC's and Connect's, and the names are those the public
// conventions of httpfence and grpcfence document.
func TestNames(t *testing.T) {
	for _, c := range []struct {
		wire    wire.Code
		connect connect.Code
		grpc    codes.Code
	}{
		{wire.CodeInvalidArgument, connect.CodeInvalidArgument, codes.InvalidArgument},
		{wire.CodeNotFound, connect.CodeNotFound, codes.NotFound},
		{wire.CodePermissionDenied, connect.CodePermissionDenied, codes.PermissionDenied},
		{wire.CodeResourceExhausted, connect.CodeResourceExhausted, codes.ResourceExhausted},
		{wire.CodeFailedPrecondition, connect.CodeFailedPrecondition, codes.FailedPrecondition},
		{wire.CodeAborted, connect.CodeAborted, codes.Aborted},
		{wire.CodeUnavailable, connect.CodeUnavailable, codes.Unavailable},
	} {
		if uint32(c.wire) != uint32(c.connect) || uint32(c.wire) != uint32(c.grpc) {
			t.Errorf("code %d: connect %d, grpc %d", c.wire, c.connect, c.grpc)
		}
	}
	for _, n := range [][2]string{
		{wire.HeaderReason, httpfence.HeaderError},
		{wire.HeaderObject, httpfence.HeaderResourceID},
		{wire.HeaderPresented, httpfence.HeaderToken},
		{wire.HeaderRequired, httpfence.HeaderRequiredToken},
		{wire.ReasonInvalidToken, httpfence.ReasonInvalidToken},
		{wire.ReasonInvalidResource, httpfence.ReasonInvalidResource},
		{wire.ReasonStaleToken, httpfence.ReasonStaleToken},
		{wire.ReasonIssuerMismatch, httpfence.ReasonIssuerMismatch},
		{wire.GRPCReason(wire.ReasonInvalidToken), grpcfence.ReasonInvalidToken},
		{wire.GRPCReason(wire.ReasonInvalidResource), grpcfence.ReasonInvalidResource},
		{wire.GRPCReason(wire.ReasonStaleToken), grpcfence.ReasonStaleToken},
		{wire.GRPCReason(wire.ReasonIssuerMismatch), grpcfence.ReasonIssuerMismatch},
		{wire.FromGRPCReason(grpcfence.ReasonStaleToken), wire.ReasonStaleToken},
		{wire.FieldRequired, "required"}, // grpcfence documents the ErrorInfo metadata keys
		{wire.FieldPresented, "presented"},
		{wire.FieldObject, "object"},
	} {
		if n[0] != n[1] {
			t.Errorf("%q != %q", n[0], n[1])
		}
	}
}
