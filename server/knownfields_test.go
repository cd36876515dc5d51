package server_test

import (
	"context"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// withFutureField returns m with field 999, which no message of this build
// has, set as a newer client would set a field this server does not know.
func withFutureField[M proto.Message](m M) M {
	b := protowire.AppendTag(nil, 999, protowire.VarintType)
	m.ProtoReflect().SetUnknown(protowire.AppendVarint(b, 1))
	return m
}

// wantRefusedUnknown fails unless code and message are the refusal of a
// field this server does not know in a message of type typeName.
func wantRefusedUnknown(t *testing.T, what string, code connect.Code, msg, typeName string) {
	t.Helper()
	if code != connect.CodeInvalidArgument || !strings.Contains(msg, "field 999 of "+typeName) || !strings.Contains(msg, "nothing was done") {
		t.Fatalf("%s: %v %q, want InvalidArgument naming field 999 of %s", what, code, msg, typeName)
	}
}

// A request with a field this server does not know is refused whole, on
// every way in (a unary call, a Pipeline call or the Pipeline message
// around it, on Connect and native, a KeepAlive message), and does
// nothing: the lock it asked for stays free. The calls beside it in the
// same message are served.
func TestServer_RefusesRequestFieldsItDoesNotKnow(t *testing.T) {
	a := newAPI(t)
	s := a.session(t, 30000)

	_, err := a.locks.Acquire(context.Background(), connect.NewRequest(withFutureField(&fencedv1.AcquireRequest{Name: "unary", Session: s, Secret: secretOf(s), Seq: 1})))
	if err == nil {
		t.Fatal("a unary acquire with a field this server does not know was served")
	}
	wantRefusedUnknown(t, "unary acquire", connect.CodeOf(err), err.Error(), "fenced.v1.AcquireRequest")

	inner := acquireCall(1, "inner", s, 2, 0)
	withFutureField(inner.GetAcquire())
	call := withFutureField(acquireCall(2, "call", s, 3, 0))
	good := acquireCall(3, "good", s, 4, 0)
	p := a.pipeline(t)
	p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{inner, call, good}})
	got := p.results(3)
	wantRefusedUnknown(t, "pipelined acquire", connect.Code(got[1].GetError().GetCode()), got[1].GetError().GetMessage(), "fenced.v1.AcquireRequest")
	wantRefusedUnknown(t, "pipelined call", connect.Code(got[2].GetError().GetCode()), got[2].GetError().GetMessage(), "fenced.v1.PipelineCall")
	if !got[3].GetAcquire().GetGranted() {
		t.Fatalf("the known call beside them: %v, want granted", got[3])
	}

	p.send(withFutureField(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{acquireCall(4, "envelope", s, 5, 0)}}))
	got = p.results(1)
	wantRefusedUnknown(t, "call in an unknown envelope", connect.Code(got[4].GetError().GetCode()), got[4].GetError().GetMessage(), "fenced.v1.PipelineRequest")

	n, _ := dialNative(t, a.addr, "")
	nativeInner := acquireCall(5, "native", s, 6, 0)
	withFutureField(nativeInner.GetAcquire())
	got = n.pipeline(1, nativeInner)
	wantRefusedUnknown(t, "native pipelined acquire", connect.Code(got[5].GetError().GetCode()), got[5].GetError().GetMessage(), "fenced.v1.AcquireRequest")

	for _, name := range []string{"unary", "inner", "call", "envelope", "native"} {
		if l := a.describe(t, name); l.GetHolder() != nil {
			t.Errorf("lock %q is held after its refused acquire: %v", name, l)
		}
	}
	if l := a.describe(t, "good"); l.GetHolder().GetSession() != s {
		t.Errorf("lock good: %v, want held by %d", l, s)
	}

	// A renewal inside a KeepAlive message, as a newer SDK might batch it.
	stream := a.sessions.KeepAlive(context.Background())
	defer stream.CloseResponse()
	renewal := &fencedv1.KeepAliveRequest{Session: s, Secret: secretOf(s), Nonce: 1, More: []*fencedv1.KeepAliveRequest{withFutureField(&fencedv1.KeepAliveRequest{Session: s, Secret: secretOf(s), Nonce: 2})}}
	if err := stream.Send(renewal); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := stream.Receive()
		if err != nil {
			wantRefusedUnknown(t, "keep-alive", connect.CodeOf(err), err.Error(), "fenced.v1.KeepAliveRequest")
			break
		}
	}
}
