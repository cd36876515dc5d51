package server_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/fenced-dev/fenced/internal/nativewire"
	"github.com/fenced-dev/fenced/internal/testserver"
	"github.com/fenced-dev/fenced/internal/tlsfiles"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/server"
)

// rawNative is a native-protocol connection driven frame by frame, as an
// attacker or a broken client would.
type rawNative struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

// dialRaw opens a TCP connection to addr and sends pre (the preface,
// or anything else) without waiting for an answer.
func dialRaw(t *testing.T, addr string, pre []byte) *rawNative {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	n := &rawNative{t: t, c: c, r: bufio.NewReader(c)}
	n.raw(pre)
	return n
}

// dialNative does the handshake with token ("" sends none) and returns
// the connection and the server's welcome.
func dialNative(t *testing.T, addr, token string) (*rawNative, *fencedv1.NativeWelcome) {
	t.Helper()
	n := dialRaw(t, addr, []byte(nativewire.Preface))
	hello := &fencedv1.NativeHello{Version: nativewire.Version}
	if token != "" {
		hello.Authorization = "Bearer " + token
	}
	n.send(nativewire.KindHello, 0, hello)
	return n, n.welcome()
}

func (n *rawNative) welcome() *fencedv1.NativeWelcome {
	n.t.Helper()
	f, err := n.read()
	if err != nil {
		n.t.Fatalf("reading the welcome: %v", err)
	}
	if f.Kind != nativewire.KindWelcome {
		n.t.Fatalf("first frame of kind %d, want a welcome", f.Kind)
	}
	var w fencedv1.NativeWelcome
	if err := proto.Unmarshal(f.Payload, &w); err != nil {
		n.t.Fatal(err)
	}
	return &w
}

func (n *rawNative) raw(b []byte) {
	n.t.Helper()
	if _, err := n.c.Write(b); err != nil {
		n.t.Fatal(err)
	}
}

func (n *rawNative) send(kind nativewire.Kind, stream uint32, m proto.Message) {
	n.t.Helper()
	b, err := nativewire.AppendFrame(nil, kind, stream, m)
	if err != nil {
		n.t.Fatal(err)
	}
	n.raw(b)
}

func (n *rawNative) read() (nativewire.Frame, error) {
	return nativewire.ReadFrame(n.r, 64<<20)
}

// end reads frames until the end of stream and returns its error message
// (code 0: ended cleanly).
func (n *rawNative) end(stream uint32) *fencedv1.PipelineError {
	n.t.Helper()
	for {
		f, err := n.read()
		if err != nil {
			n.t.Fatalf("waiting for the end of stream %d: %v", stream, err)
		}
		if f.Kind == nativewire.KindEnd && f.Stream == stream {
			var e fencedv1.PipelineError
			if err := proto.Unmarshal(f.Payload, &e); err != nil {
				n.t.Fatal(err)
			}
			return &e
		}
	}
}

// closed fails unless the server closes the connection, sending nothing
// more than frames on stream 0 and ends.
func (n *rawNative) closed() {
	n.t.Helper()
	for {
		f, err := n.read()
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) || err != nil && strings.Contains(err.Error(), "reset") {
			return
		}
		if err != nil {
			n.t.Fatalf("waiting for the server to close the connection: %v", err)
		}
		if f.Kind != nativewire.KindEnd && f.Kind != nativewire.KindWelcome {
			n.t.Fatalf("a frame of kind %d on stream %d from a connection that should be closed", f.Kind, f.Stream)
		}
	}
}

// pipeline sends calls on stream and returns their answers by id.
func (n *rawNative) pipeline(stream uint32, calls ...*fencedv1.PipelineCall) map[uint64]*fencedv1.PipelineResult {
	n.t.Helper()
	n.send(nativewire.KindPipeline, stream, &fencedv1.PipelineRequest{Calls: calls})
	got := map[uint64]*fencedv1.PipelineResult{}
	for len(got) < len(calls) {
		f, err := n.read()
		if err != nil {
			n.t.Fatal(err)
		}
		if f.Kind == nativewire.KindEnd {
			n.t.Fatalf("stream %d ended before its answers: %x", f.Stream, f.Payload)
		}
		var resp fencedv1.PipelineResponse
		if err := proto.Unmarshal(f.Payload, &resp); err != nil {
			n.t.Fatal(err)
		}
		for _, r := range resp.Results {
			got[r.Id] = r
		}
	}
	return got
}

// connectPipeline sends calls on a Connect Pipeline stream of a and
// returns their answers by id.
func connectPipeline(t *testing.T, a *authAPI, calls ...*fencedv1.PipelineCall) map[uint64]*fencedv1.PipelineResult {
	t.Helper()
	stream := a.locks.Pipeline(context.Background())
	defer stream.CloseResponse()
	if err := stream.Send(&fencedv1.PipelineRequest{Calls: calls}); err != nil {
		t.Fatal(err)
	}
	got := map[uint64]*fencedv1.PipelineResult{}
	for len(got) < len(calls) {
		resp, err := stream.Receive()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range resp.Results {
			got[r.Id] = r
		}
	}
	stream.CloseRequest()
	return got
}

// sessionCount returns the live sessions, as the admin sees them.
func sessionCount(t *testing.T, addr string) int {
	t.Helper()
	st, err := asIdentity(addr, adminToken).locks.Status(context.Background(), connect.NewRequest(&fencedv1.StatusRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	return len(st.Msg.Sessions)
}

// An unauthenticated or wrongly authenticated native connection is
// refused at its hello, audited, and gets nothing: no stream opens, its
// frames change nothing.
func TestNative_UnauthenticatedRefused(t *testing.T) {
	srv, _, auditFile := startAuth(t)
	app := asIdentity(srv.Addr(), appToken)
	sess, secret := app.session(t)
	for name, token := range map[string]string{"no token": "", "wrong token": "not-a-token", "admin's token with a space": " " + adminToken} {
		n, w := dialNative(t, srv.Addr(), token)
		if connect.Code(w.Code) != connect.CodeUnauthenticated {
			t.Fatalf("%s: welcome %v, want Unauthenticated", name, w)
		}
		// Frames sent anyway after the refusal are not served.
		b, _ := nativewire.AppendFrame(nil, nativewire.KindPipeline, 1, &fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{
			{Id: 1, Call: &fencedv1.PipelineCall_Acquire{Acquire: &fencedv1.AcquireRequest{Name: "orders/a", Session: sess, Secret: secret}}},
		}})
		_, _ = n.c.Write(b)
		n.closed()
	}
	if got := sessionCount(t, srv.Addr()); got != 1 {
		t.Fatalf("%d sessions after refused connections, want 1 (app's own)", got)
	}
	st, err := asIdentity(srv.Addr(), adminToken).locks.Status(context.Background(), connect.NewRequest(&fencedv1.StatusRequest{Name: "orders/a"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Msg.Locks) != 0 && st.Msg.Locks[0].GetHolder() != nil {
		t.Fatalf("a refused connection's acquire took the lock: %v", st.Msg.Locks)
	}
	if !testserver.AuditHas(t, auditFile, map[string]string{"event": "authentication-failed", "procedure": "fenced/1", "outcome": "refused"}) {
		t.Fatal("audit log has no authentication failure of a native connection")
	}
}

// The calls of a native Pipeline stream are authorized one by one and
// checked against their session's secret exactly as on a Connect stream:
// the same inputs get the same answers, codes and messages.
func TestNative_SameAnswersAsConnect(t *testing.T) {
	srv, _, _ := startAuth(t)
	app := asIdentity(srv.Addr(), appToken)
	owner, ownerSecret := app.session(t)
	other, otherSecret := app.session(t)
	if r := connectPipeline(t, app, &fencedv1.PipelineCall{Id: 1, Call: &fencedv1.PipelineCall_Acquire{Acquire: &fencedv1.AcquireRequest{Name: "orders/held", Session: owner, Seq: 1, Secret: ownerSecret}}}); r[1].GetAcquire() == nil || !r[1].GetAcquire().Granted {
		t.Fatalf("owner's acquire: %v", r[1])
	}
	calls := func() []*fencedv1.PipelineCall {
		return []*fencedv1.PipelineCall{
			// Another session's grant released with that session's id and the
			// wrong secret, or with its own.
			{Id: 1, Call: &fencedv1.PipelineCall_Release{Release: &fencedv1.ReleaseRequest{Name: "orders/held", Session: owner, Seq: 1, Secret: otherSecret}}},
			{Id: 2, Call: &fencedv1.PipelineCall_Release{Release: &fencedv1.ReleaseRequest{Name: "orders/held", Session: owner, Seq: 1}}},
			{Id: 3, Call: &fencedv1.PipelineCall_Release{Release: &fencedv1.ReleaseRequest{Name: "orders/held", Session: other, Seq: 1, Secret: otherSecret}}},
			// An acquire in the owner's session with another's secret.
			{Id: 4, Call: &fencedv1.PipelineCall_Acquire{Acquire: &fencedv1.AcquireRequest{Name: "orders/new", Session: owner, Seq: 2, Secret: otherSecret}}},
			// Outside the identity's prefix.
			{Id: 5, Call: &fencedv1.PipelineCall_Acquire{Acquire: &fencedv1.AcquireRequest{Name: "billing/y", Session: other, Seq: 1, Secret: otherSecret}}},
			{Id: 6, Call: &fencedv1.PipelineCall_KvPut{KvPut: &fencedv1.KVPutRequest{Key: "billing/k", Value: []byte("v"), Token: 1}}},
			// No call at all.
			{Id: 7},
		}
	}
	viaConnect := connectPipeline(t, app, calls()...)
	n, w := dialNative(t, srv.Addr(), appToken)
	if w.Code != 0 {
		t.Fatalf("welcome %v", w)
	}
	viaNative := n.pipeline(1, calls()...)
	for id := uint64(1); id <= 7; id++ {
		c, nat := viaConnect[id], viaNative[id]
		if c.GetError() == nil && c.GetRelease().GetResult() != fencedv1.ReleaseResult_RELEASE_RESULT_NOT_OWNED {
			t.Fatalf("call %d succeeded on Connect: %v", id, c)
		}
		if !proto.Equal(c, nat) {
			t.Errorf("call %d: Connect answered %v, native %v", id, c, nat)
		}
	}
	st, err := asIdentity(srv.Addr(), adminToken).locks.Status(context.Background(), connect.NewRequest(&fencedv1.StatusRequest{Name: "orders/held"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Msg.Locks) != 1 || st.Msg.Locks[0].GetHolder().GetSession() != owner {
		t.Fatalf("orders/held after the refused releases: %v, want held by %d", st.Msg.Locks, owner)
	}
	// The identity's own calls work, on the same connection.
	if r := n.pipeline(1, &fencedv1.PipelineCall{Id: 8, Call: &fencedv1.PipelineCall_Release{Release: &fencedv1.ReleaseRequest{Name: "orders/held", Session: owner, Seq: 3, Secret: ownerSecret}}}); r[8].GetRelease() == nil {
		t.Fatalf("owner's release: %v", r[8])
	}
	// A KeepAlive stream needs acquire somewhere: the reader has none.
	rn, w := dialNative(t, srv.Addr(), readerToken)
	if w.Code != 0 {
		t.Fatalf("reader's welcome %v", w)
	}
	rn.send(nativewire.KindKeepAlive, 1, &fencedv1.KeepAliveRequest{Session: owner, Nonce: 1, Secret: ownerSecret})
	if e := rn.end(1); connect.Code(e.Code) != connect.CodePermissionDenied {
		t.Fatalf("reader's keep-alive stream ended with %v, want PermissionDenied", e)
	}
}

// A garbage preface, a first frame that is not a hello, an unknown
// version, a frame over the limit and a malformed frame each get a clear
// error and a closed connection, and change nothing.
func TestNative_MalformedInputClosesConnection(t *testing.T) {
	srv := testserver.Start(t, func(c *server.Config) { c.Limits.NativeMaxFrameBytes = 1024 })
	hello, _ := nativewire.AppendFrame(nil, nativewire.KindHello, 0, &fencedv1.NativeHello{Version: nativewire.Version})
	pre := []byte(nativewire.Preface)
	withHello := append(append([]byte(nil), pre...), hello...)
	tooBig := make([]byte, nativewire.HeaderLen)
	binary.BigEndian.PutUint32(tooBig, 5+2000)
	tooBig[4] = byte(nativewire.KindPipeline)
	binary.BigEndian.PutUint32(tooBig[5:], 1)
	big, _ := nativewire.AppendFrame(nil, nativewire.KindPipeline, 1, &fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{
		{Id: 1, Call: &fencedv1.PipelineCall_KvPut{KvPut: &fencedv1.KVPutRequest{Key: "k", Value: make([]byte, 4000)}}}}})
	v2, _ := nativewire.AppendFrame(nil, nativewire.KindHello, 0, &fencedv1.NativeHello{Version: 2})
	notHello, _ := nativewire.AppendFrame(nil, nativewire.KindPipeline, 1, &fencedv1.PipelineRequest{})
	for _, tc := range []struct {
		name     string
		before   []byte // before the welcome
		after    []byte // after it, nil: refused at the handshake
		wantCode connect.Code
		words    string
	}{
		{"garbage preface", []byte("\x00GARBAGE/9\r\nxx"), nil, connect.CodeInvalidArgument, "preface"},
		{"a first frame that is no hello", append(append([]byte(nil), pre...), notHello...), nil, connect.CodeInvalidArgument, "not a hello"},
		{"unknown version", append(append([]byte(nil), pre...), v2...), nil, connect.CodeInvalidArgument, "version 2"},
		{"a hello over the limit", append(append([]byte(nil), pre...), tooBig[:4]...), nil, connect.CodeInvalidArgument, "too big"},
		{"a frame header over the limit", withHello, tooBig, connect.CodeInvalidArgument, "too big"},
		{"a whole frame over the limit", withHello, big, connect.CodeInvalidArgument, "too big"},
		{"an unknown kind", withHello, []byte{0, 0, 0, 5, 99, 0, 0, 0, 1}, connect.CodeInvalidArgument, "unknown kind 99"},
		{"a length shorter than the header", withHello, []byte{0, 0, 0, 2, 3, 0, 0, 0, 1}, connect.CodeInvalidArgument, "shorter"},
		{"a stream frame on stream 0", withHello, []byte{0, 0, 0, 5, 3, 0, 0, 0, 0}, connect.CodeInvalidArgument, "stream 0"},
		{"a payload that is no protobuf", withHello, []byte{0, 0, 0, 8, 3, 0, 0, 0, 1, 0xff, 0xff, 0xff}, connect.CodeInvalidArgument, "stream 1"},
		{"a welcome from the client", withHello, func() []byte {
			b, _ := nativewire.AppendFrame(nil, nativewire.KindWelcome, 0, &fencedv1.NativeWelcome{})
			return b
		}(), connect.CodeInvalidArgument, "kind 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := dialRaw(t, srv.Addr(), tc.before)
			if tc.after == nil {
				// tooBig[:4] is only a length: finish the header.
				if strings.Contains(tc.name, "hello over") {
					n.raw([]byte{byte(nativewire.KindHello), 0, 0, 0, 0})
				}
				w := n.welcome()
				if connect.Code(w.Code) != tc.wantCode || !strings.Contains(w.Message, tc.words) {
					t.Fatalf("welcome %v, want %v naming %q", w, tc.wantCode, tc.words)
				}
				n.closed()
				return
			}
			if w := n.welcome(); w.Code != 0 {
				t.Fatalf("welcome %v", w)
			}
			n.raw(tc.after)
			e := n.end(0)
			if connect.Code(e.Code) != tc.wantCode || !strings.Contains(e.Message, tc.words) {
				t.Fatalf("connection ended with %v, want %v naming %q", e, tc.wantCode, tc.words)
			}
			n.closed()
		})
	}
	st, err := asIdentity(srv.Addr(), "").locks.Status(context.Background(), connect.NewRequest(&fencedv1.StatusRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Msg.Sessions) != 0 || len(st.Msg.Locks) != 0 {
		t.Fatalf("malformed input changed the state: %v", st.Msg)
	}
	// The server still serves native connections and HTTP.
	if _, w := dialNative(t, srv.Addr(), ""); w.Code != 0 {
		t.Fatalf("welcome after the attacks: %v", w)
	}
}

// Cancellation and stream ends behave as on Connect: a pipelined cancel
// ends a waiting acquire, not granted, and takes it out of the queue; abandoning the stream (cancel
// frame) withdraws the waits still running; closing the KeepAlive
// stream's sending side ends it cleanly once its renewals are answered.
func TestNative_CancelAndStreamEnd(t *testing.T) {
	srv := testserver.Start(t)
	api := asIdentity(srv.Addr(), "")
	holder, holderSecret := api.session(t)
	waiter, waiterSecret := api.session(t)
	n, w := dialNative(t, srv.Addr(), "")
	if w.Code != 0 {
		t.Fatalf("welcome %v", w)
	}
	acquire := func(id, session, seq uint64, secret string, waitMs int64) *fencedv1.PipelineCall {
		return &fencedv1.PipelineCall{Id: id, Call: &fencedv1.PipelineCall_Acquire{Acquire: &fencedv1.AcquireRequest{Name: "x", Session: session, Seq: seq, Secret: secret, WaitMs: waitMs}}}
	}
	if r := n.pipeline(1, acquire(1, holder, 1, holderSecret, 0)); !r[1].GetAcquire().GetGranted() {
		t.Fatalf("holder's acquire: %v", r[1])
	}
	n.send(nativewire.KindPipeline, 1, &fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{acquire(2, waiter, 1, waiterSecret, 60000)}})
	waitFor(t, "the waiter to queue", func() bool { return len(waitersOf(t, api, "x")) == 1 })
	n.send(nativewire.KindPipeline, 1, &fencedv1.PipelineRequest{Cancel: []uint64{2}})
	f, err := n.read()
	if err != nil {
		t.Fatal(err)
	}
	var resp fencedv1.PipelineResponse
	if err := proto.Unmarshal(f.Payload, &resp); err != nil || len(resp.Results) != 1 || resp.Results[0].GetId() != 2 || resp.Results[0].GetAcquire().GetGranted() {
		t.Fatalf("cancelled acquire answered %v (%v), want not granted", &resp, err)
	}
	waitFor(t, "the cancelled wait to leave the queue", func() bool { return len(waitersOf(t, api, "x")) == 0 })
	// A wait on a second stream, abandoned with a cancel frame.
	n.send(nativewire.KindPipeline, 2, &fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{acquire(1, waiter, 2, waiterSecret, 60000)}})
	waitFor(t, "the second wait to queue", func() bool { return len(waitersOf(t, api, "x")) == 1 })
	n.send(nativewire.KindCancel, 2, nil)
	if e := n.end(2); e.Code != 0 && connect.Code(e.Code) != connect.CodeCanceled {
		t.Fatalf("abandoned stream ended with %v", e)
	}
	// The stream ends once its calls have: the wait was withdrawn by then
	// (its withdrawal's proposal may take up to cancelWaitTimeout, 10s, on
	// a loaded machine; one run waited longer than waitFor's 15s for it).
	if w := waitersOf(t, api, "x"); len(w) != 0 {
		t.Fatalf("waiters after the stream carrying the wait was abandoned: %v", w)
	}
	// KeepAlive: a renewal answered, then the client's close ends the stream.
	n.send(nativewire.KindKeepAlive, 3, &fencedv1.KeepAliveRequest{Session: holder, Nonce: 7, Secret: holderSecret})
	f, err = n.read()
	if err != nil {
		t.Fatal(err)
	}
	var ka fencedv1.KeepAliveResponse
	if err := proto.Unmarshal(f.Payload, &ka); err != nil || f.Kind != nativewire.KindKeepAlive || ka.Nonce != 7 || ka.TtlMs == 0 {
		t.Fatalf("renewal answered %v (kind %d, %v)", &ka, f.Kind, err)
	}
	// With the wrong secret: not_owner, as on Connect.
	n.send(nativewire.KindKeepAlive, 3, &fencedv1.KeepAliveRequest{Session: holder, Nonce: 8, Secret: waiterSecret})
	if f, err = n.read(); err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(f.Payload, &ka); err != nil || ka.Nonce != 8 || !ka.NotOwner || ka.TtlMs != 0 {
		t.Fatalf("renewal with another session's secret answered %v, want not_owner", &ka)
	}
	n.send(nativewire.KindCloseSend, 3, nil)
	if e := n.end(3); e.Code != 0 {
		t.Fatalf("closed keep-alive stream ended with %v, want no error", e)
	}
	// The connection still serves its other stream.
	if r := n.pipeline(1, acquire(3, waiter, 3, waiterSecret, 0)); r[3].GetAcquire() == nil {
		t.Fatalf("acquire after the other streams ended: %v", r[3])
	}
}

// waitersOf returns the sessions queued on name.
func waitersOf(t *testing.T, a *authAPI, name string) []uint64 {
	t.Helper()
	d, err := a.locks.Describe(context.Background(), connect.NewRequest(&fencedv1.DescribeRequest{Name: name}))
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, w := range d.Msg.GetLock().GetWaiters() {
		out = append(out, w.GetSession())
	}
	return out
}

// With --native=false the API port speaks HTTP only: a native preface is
// not answered with a welcome.
func TestNative_Disabled(t *testing.T) {
	srv := testserver.Start(t, func(c *server.Config) { c.Limits.DisableNative = true })
	n := dialRaw(t, srv.Addr(), []byte(nativewire.Preface))
	hello, _ := nativewire.AppendFrame(nil, nativewire.KindHello, 0, &fencedv1.NativeHello{Version: nativewire.Version})
	n.raw(hello)
	f, err := n.read()
	if err == nil && f.Kind == nativewire.KindWelcome {
		t.Fatalf("a server with the native protocol off welcomed a native connection")
	}
}

// dialNativeTLS opens a native connection over TLS (ALPN fenced/1)
// presenting the certificate file of ca's directory (none when ""), sends
// a hello without a token and returns the welcome.
func dialNativeTLS(t *testing.T, ca *certAuth, file string) (*rawNative, *fencedv1.NativeWelcome) {
	t.Helper()
	pool, err := tlsfiles.LoadPool(filepath.Join(ca.dir, tlsfiles.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{nativewire.ALPN, "h2"}}
	if file != "" {
		c, err := tls.LoadX509KeyPair(filepath.Join(ca.dir, file+".crt"), filepath.Join(ca.dir, file+".key"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ca.srv.Addr(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if p := c.ConnectionState().NegotiatedProtocol; p != nativewire.ALPN {
		t.Fatalf("TLS chose %q, want %q", p, nativewire.ALPN)
	}
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	n := &rawNative{t: t, c: c, r: bufio.NewReader(c)}
	n.send(nativewire.KindHello, 0, &fencedv1.NativeHello{Version: nativewire.Version})
	return n, n.welcome()
}

// Over TLS a native connection's client certificate is its identity, as
// on the HTTP path: a certificate with a cert line gets that line's
// permissions; one without a line, a member's node certificate (which on
// HTTP only vouches for a forwarded identity, and nothing can be forwarded
// here) and none are refused.
func TestNative_ClientCertificateIsIdentity(t *testing.T) {
	ca := startCertAuth(t)
	app := ca.as(t, "app", nil)
	sess, secret := app.session(t)
	n, w := dialNativeTLS(t, ca, "app")
	if w.Code != 0 {
		t.Fatalf("app certificate: welcome %v", w)
	}
	got := n.pipeline(1,
		&fencedv1.PipelineCall{Id: 1, Call: &fencedv1.PipelineCall_Acquire{Acquire: &fencedv1.AcquireRequest{Name: "orders/1", Session: sess, Seq: 1, Secret: secret}}},
		&fencedv1.PipelineCall{Id: 2, Call: &fencedv1.PipelineCall_Acquire{Acquire: &fencedv1.AcquireRequest{Name: "billing/1", Session: sess, Seq: 2, Secret: secret}}})
	if !got[1].GetAcquire().GetGranted() {
		t.Fatalf("app certificate acquires orders/1: %v", got[1])
	}
	if e := got[2].GetError(); connect.Code(e.GetCode()) != connect.CodePermissionDenied || !strings.Contains(e.GetMessage(), `"app"`) {
		t.Fatalf("app certificate acquires billing/1: %v, want PermissionDenied naming app", got[2])
	}
	for name, file := range map[string]string{"a certificate without a cert line": "stranger", "a member's node certificate": "n1", "no certificate": ""} {
		n, w := dialNativeTLS(t, ca, file)
		if connect.Code(w.Code) != connect.CodeUnauthenticated {
			t.Fatalf("%s: welcome %v, want Unauthenticated", name, w)
		}
		n.closed()
	}
}

// A native connection without a stream is closed after --idle-timeout, as
// an idle HTTP connection is; one with a stream open is not.
func TestNative_IdleConnectionClosed(t *testing.T) {
	srv := testserver.Start(t, func(c *server.Config) { c.Limits.IdleTimeout = 300 * time.Millisecond })
	api := asIdentity(srv.Addr(), "")
	sess, secret := api.session(t)
	idle, w := dialNative(t, srv.Addr(), "")
	if w.Code != 0 {
		t.Fatalf("welcome %v", w)
	}
	busy, w := dialNative(t, srv.Addr(), "")
	if w.Code != 0 {
		t.Fatalf("welcome %v", w)
	}
	busy.send(nativewire.KindKeepAlive, 1, &fencedv1.KeepAliveRequest{Session: sess, Nonce: 1, Secret: secret})
	if f, err := busy.read(); err != nil || f.Kind != nativewire.KindKeepAlive {
		t.Fatalf("renewal: %v %v", f, err)
	}
	start := time.Now()
	idle.closed()
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Fatalf("idle connection closed after %v, before the idle timeout", waited)
	}
	time.Sleep(600 * time.Millisecond)
	busy.send(nativewire.KindKeepAlive, 1, &fencedv1.KeepAliveRequest{Session: sess, Nonce: 2, Secret: secret})
	f, err := busy.read()
	var ka fencedv1.KeepAliveResponse
	if err != nil || f.Kind != nativewire.KindKeepAlive || proto.Unmarshal(f.Payload, &ka) != nil || ka.Nonce != 2 {
		t.Fatalf("a connection with an open stream was cut after the idle timeout: %v %v", f, err)
	}
}

// FuzzNativeConn sends arbitrary bytes after a valid hello to an
// in-process server: whatever they are, the server answers only frames
// that parse, never panics or stops serving, and a new native connection
// is welcomed after each input.
func FuzzNativeConn(f *testing.F) {
	pipe, _ := nativewire.AppendFrame(nil, nativewire.KindPipeline, 1, &fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{
		{Id: 1, Call: &fencedv1.PipelineCall_Acquire{Acquire: &fencedv1.AcquireRequest{Name: "f", Session: 1, Seq: 1}}}}, Cancel: []uint64{1}})
	ka, _ := nativewire.AppendFrame(nil, nativewire.KindKeepAlive, 2, &fencedv1.KeepAliveRequest{Session: 1, Nonce: 1})
	f.Add(pipe)
	f.Add(append(append([]byte(nil), ka...), 0, 0, 0, 5, byte(nativewire.KindCloseSend), 0, 0, 0, 2))
	f.Add([]byte{0, 0, 0, 5, byte(nativewire.KindCancel), 0, 0, 0, 9})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	srv := testserver.Start(f, func(c *server.Config) { c.Limits.NativeMaxFrameBytes = 4096 })
	hello, _ := nativewire.AppendFrame([]byte(nativewire.Preface), nativewire.KindHello, 0, &fencedv1.NativeHello{Version: nativewire.Version})
	dial := func(t *testing.T) net.Conn {
		c, err := net.DialTimeout("tcp", srv.Addr(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(hello); err != nil {
			t.Fatal(err)
		}
		return c
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := dial(t)
		defer c.Close()
		_, _ = c.Write(data)
		_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		r := bufio.NewReader(c)
		for {
			if _, err := nativewire.ReadFrame(r, 64<<20); err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "reset") {
					break
				}
				t.Fatalf("the server sent something that is no frame: %v", err)
			}
		}
		c2 := dial(t)
		defer c2.Close()
		w, err := nativewire.ReadFrame(bufio.NewReader(c2), 1<<16)
		if err != nil || w.Kind != nativewire.KindWelcome {
			t.Fatalf("no welcome after the input: %v %v", w, err)
		}
	})
}

// TestNative_CallsAnsweredBeforeEnd sends rounds of calls and the close
// of the client's side in one write, so the reader handles the calls and
// sees the close back to back: every call is answered, and before its
// stream's end (the end waits for calls the reader started; a call
// started after it would be answered after the end frame, or not at all).
func TestNative_CallsAnsweredBeforeEnd(t *testing.T) {
	srv := testserver.Start(t)
	api := asIdentity(srv.Addr(), "")
	session, secret := api.session(t)
	n, w := dialNative(t, srv.Addr(), "")
	if w.Code != 0 {
		t.Fatalf("welcome %v", w)
	}
	const rounds, perRound = 20, 8
	seq := uint64(0)
	for round := range rounds {
		stream := uint32(round + 1)
		var b []byte
		for i := range perRound {
			seq++
			call := &fencedv1.PipelineCall{Id: uint64(i), Call: &fencedv1.PipelineCall_Acquire{Acquire: &fencedv1.AcquireRequest{
				Name: fmt.Sprintf("end-%d-%d", round, i), Session: session, Seq: seq, Secret: secret}}}
			var err error
			if b, err = nativewire.AppendFrame(b, nativewire.KindPipeline, stream, &fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{call}}); err != nil {
				t.Fatal(err)
			}
		}
		b, _ = nativewire.AppendFrame(b, nativewire.KindCloseSend, stream, nil)
		n.raw(b)
		answered := map[uint64]bool{}
		for {
			f, err := n.read()
			if err != nil {
				t.Fatal(err)
			}
			if f.Stream != stream {
				t.Fatalf("round %d: a frame of kind %d on stream %d", round, f.Kind, f.Stream)
			}
			if f.Kind == nativewire.KindEnd {
				var e fencedv1.PipelineError
				if err := proto.Unmarshal(f.Payload, &e); err != nil || e.Code != 0 {
					t.Fatalf("round %d: stream ended with %v (%v)", round, &e, err)
				}
				break
			}
			var resp fencedv1.PipelineResponse
			if err := proto.Unmarshal(f.Payload, &resp); err != nil {
				t.Fatal(err)
			}
			for _, r := range resp.Results {
				answered[r.Id] = true
			}
		}
		if len(answered) != perRound {
			t.Fatalf("round %d: %d of %d calls answered before the stream's end: %v", round, len(answered), perRound, answered)
		}
	}
}

// TestNative_FramesDecodedFromOneBuffer sends frames of calls naming
// different locks, of different lengths, in one write: the connection's
// reader reads each frame into the buffer the previous one was read into,
// so a call that kept a view of that buffer instead of its own copy would
// name a later frame's lock. Every grant must name the lock its call
// asked for.
func TestNative_FramesDecodedFromOneBuffer(t *testing.T) {
	srv := testserver.Start(t)
	api := asIdentity(srv.Addr(), "")
	session, secret := api.session(t)
	n, w := dialNative(t, srv.Addr(), "")
	if w.Code != 0 {
		t.Fatalf("welcome %v", w)
	}
	const calls = 16
	want := map[uint64]string{}
	var b []byte
	for i := range calls {
		name := fmt.Sprintf("buf-%d-%s", i, strings.Repeat("x", (calls-i)*7))
		want[uint64(i)] = name
		call := &fencedv1.PipelineCall{Id: uint64(i), Call: &fencedv1.PipelineCall_Acquire{Acquire: &fencedv1.AcquireRequest{
			Name: name, Session: session, Seq: uint64(i + 1), Secret: secret}}}
		var err error
		if b, err = nativewire.AppendFrame(b, nativewire.KindPipeline, 1, &fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{call}}); err != nil {
			t.Fatal(err)
		}
	}
	n.raw(b)
	for len(want) > 0 {
		f, err := n.read()
		if err != nil {
			t.Fatal(err)
		}
		if f.Stream != 1 || f.Kind != nativewire.KindPipeline {
			t.Fatalf("a frame of kind %d on stream %d, want answers on stream 1", f.Kind, f.Stream)
		}
		var resp fencedv1.PipelineResponse
		if err := proto.Unmarshal(f.Payload, &resp); err != nil {
			t.Fatal(err)
		}
		for _, r := range resp.Results {
			name, ok := want[r.Id]
			if !ok {
				t.Fatalf("an answer to call %d, not asked or answered twice", r.Id)
			}
			if got := r.GetAcquire().GetGrant().GetName(); !r.GetAcquire().GetGranted() || got != name {
				t.Fatalf("call %d answered %v, want a grant of %s", r.Id, r, name)
			}
			delete(want, r.Id)
		}
	}
}
