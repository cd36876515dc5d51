package wireconnect_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/internal/wire"
	"github.com/fenced-dev/fenced/internal/wire/wireconnect"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// failing answers every Put with the error named by its key, as the
// fenced server answers: through Error.
type failing struct {
	fencedv1connect.UnimplementedKVServiceHandler
	errs map[string]error
}

func (f *failing) Put(_ context.Context, req *connect.Request[fencedv1.KVPutRequest]) (*connect.Response[fencedv1.KVPutResponse], error) {
	err := f.errs[req.Msg.Key]
	if ce, ok := wireconnect.Error(err); ok {
		return nil, ce
	}
	return nil, err
}

// TestRoundTrip sends every fence error through a real Connect handler and
// client: the client gets the same fence error, reading the same, with the
// fields of its concrete type, and the Connect code.
func TestRoundTrip(t *testing.T) {
	stale := &fence.StaleTokenError{Object: "orders/7", Presented: 3, Required: 9}
	version := &fence.VersionMismatchError{Object: "k", Expected: 4, Current: 6}
	errs := map[string]error{"stale": stale, "version": version}
	sentinels := []error{fence.ErrInvalidArgument, fence.ErrInvalidToken, fence.ErrStaleToken, fence.ErrIssuerMismatch,
		fence.ErrSessionNotFound, fence.ErrNotGranted, fence.ErrLockLost, fence.ErrTokenOverflow, fence.ErrNotLeader, fence.ErrLimitExceeded,
		fence.ErrVersionMismatch, fence.ErrNotOwner, fence.ErrPermissionDenied, fence.ErrPermissionDenied}
	for i, s := range sentinels {
		errs[fmt.Sprint("sentinel-", i)] = fmt.Errorf("%w: because", s)
	}
	_, h := fencedv1connect.NewKVServiceHandler(&failing{errs: errs})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	kv := fencedv1connect.NewKVServiceClient(srv.Client(), srv.URL)
	for key, want := range errs {
		t.Run(key, func(t *testing.T) {
			_, err := kv.Put(context.Background(), connect.NewRequest(&fencedv1.KVPutRequest{Key: key}))
			err = wireconnect.Decode(err, wire.Call{Object: "fallback", Token: 1})
			ce, _ := wireconnect.Error(want)
			if !wireconnect.Decoded(err) || connect.CodeOf(err) != ce.Code() || err.Error() != want.Error() {
				t.Fatalf("err=%v (code %v), want %q with code %v", err, connect.CodeOf(err), want, ce.Code())
			}
			var se *fence.StaleTokenError
			var vm *fence.VersionMismatchError
			switch want {
			case stale:
				if !errors.As(err, &se) || *se != *stale {
					t.Fatalf("err=%v, want %+v", err, stale)
				}
			case version:
				if !errors.As(err, &vm) || *vm != *version || !errors.Is(err, fence.ErrVersionMismatch) {
					t.Fatalf("err=%v, want %+v", err, version)
				}
			default:
				if !errors.Is(err, errors.Unwrap(want)) || errors.As(err, &se) || errors.As(err, &vm) {
					t.Fatalf("err=%v, want %v", err, errors.Unwrap(want))
				}
			}
			if again := wireconnect.Decode(err, wire.Call{}); again != err {
				t.Fatalf("decoding twice changed %v to %v", err, again)
			}
		})
	}
}

// A Connect error without a reason (from the transport, or a server that
// sent only codes) is decoded by its code where the code says enough, and
// otherwise left alone.
func TestDecode_WithoutReason(t *testing.T) {
	err := wireconnect.Decode(connect.NewError(connect.CodeNotFound, errors.New("session 4 is gone")), wire.Call{})
	if !errors.Is(err, fence.ErrSessionNotFound) || err.Error() != "session 4 is gone" {
		t.Errorf("NotFound decoded to %v", err)
	}
	for _, in := range []error{
		connect.NewError(connect.CodeUnavailable, errors.New("no leader")),
		connect.NewError(connect.CodeFailedPrecondition, errors.New("stale?")),
		errors.New("not a connect error"),
		nil,
	} {
		if got := wireconnect.Decode(in, wire.Call{}); got != in || wireconnect.Decoded(got) {
			t.Errorf("Decode(%v)=%v, want it unchanged", in, got)
		}
	}
	if ce, ok := wireconnect.Error(errors.New("other")); ok || ce != nil {
		t.Errorf("Error(other)=%v, %v", ce, ok)
	}
}
