package server_test

import (
	"context"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fenced-dev/fenced/internal/testserver"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// countingTransport counts the requests sent per URL path.
type countingTransport struct {
	acquires atomic.Int64
	h2c      http.Transport
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/Acquire") {
		c.acquires.Add(1)
	}
	return c.h2c.RoundTrip(r)
}

type api struct {
	sessions fencedv1connect.SessionServiceClient
	locks    fencedv1connect.LockServiceClient
	counter  *countingTransport
	addr     string
}

func newAPI(t *testing.T, opts ...testserver.Option) *api {
	srv := testserver.Start(t, opts...)
	ct := &countingTransport{}
	ct.h2c.Protocols = new(http.Protocols)
	ct.h2c.Protocols.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: ct}
	base := "http://" + srv.Addr()
	return &api{
		sessions: fencedv1connect.NewSessionServiceClient(hc, base),
		locks:    fencedv1connect.NewLockServiceClient(hc, base),
		counter:  ct,
		addr:     srv.Addr(),
	}
}

// secrets holds the secret of every session the tests created, by
// session id.
var secrets sync.Map

// secretOf returns the secret of a session created by a.session ("" for
// any other id).
func secretOf(session uint64) string {
	v, _ := secrets.Load(session)
	s, _ := v.(string)
	return s
}

// session creates a session (the server generates its secret) and
// remembers its secret for secretOf. Each test starts its own server, so
// ids repeat across tests: tests run one at a time (none is parallel), and
// each overwrites the secrets of the ids it creates.
func (a *api) session(t *testing.T, ttlMs int64) uint64 {
	t.Helper()
	resp, err := a.sessions.CreateSession(context.Background(), connect.NewRequest(&fencedv1.CreateSessionRequest{TtlMs: ttlMs}))
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	secrets.Store(resp.Msg.Session, resp.Msg.Secret)
	return resp.Msg.Session
}

func (a *api) acquire(t *testing.T, name string, session, seq uint64, waitMs int64) (*fencedv1.AcquireResponse, error) {
	t.Helper()
	resp, err := a.locks.Acquire(context.Background(), connect.NewRequest(&fencedv1.AcquireRequest{Name: name, Session: session, Secret: secretOf(session), Seq: seq, WaitMs: waitMs}))
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

func (a *api) describe(t *testing.T, name string) *fencedv1.LockInfo {
	t.Helper()
	resp, err := a.locks.Describe(context.Background(), connect.NewRequest(&fencedv1.DescribeRequest{Name: name}))
	if err != nil {
		t.Fatalf("Describe: %v", err)
	}
	return resp.Msg.Lock
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 15s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Waiters are granted in arrival order, the grant is pushed to the waiting
// call, and a waiting call sends exactly one request.
func TestAcquire_WaitersGrantedFIFOWithoutPolling(t *testing.T) {
	a := newAPI(t)
	holder := a.session(t, 30000)
	first, err := a.acquire(t, "q", holder, 1, 0)
	if err != nil || !first.Granted {
		t.Fatalf("holder acquire: %v %v", first, err)
	}
	type result struct {
		session uint64
		resp    *fencedv1.AcquireResponse
		err     error
	}
	results := make(chan result, 3)
	var waiters []uint64
	for i := 0; i < 3; i++ {
		s := a.session(t, 30000)
		waiters = append(waiters, s)
		go func() {
			resp, err := a.acquire(t, "q", s, 1, 20000)
			results <- result{s, resp, err}
		}()
		waitFor(t, "waiter queued", func() bool { return len(a.describe(t, "q").Waiters) == i+1 })
	}
	before := a.counter.acquires.Load()
	time.Sleep(300 * time.Millisecond) // waiting calls must stay silent
	if got := a.counter.acquires.Load(); got != before {
		t.Fatalf("waiting calls sent %d more Acquire requests while waiting, want 0", got-before)
	}

	release := func(session, seq uint64) {
		resp, err := a.locks.Release(context.Background(), connect.NewRequest(&fencedv1.ReleaseRequest{Name: "q", Session: session, Secret: secretOf(session), Seq: seq}))
		if err != nil || resp.Msg.Result != fencedv1.ReleaseResult_RELEASE_RESULT_RELEASED {
			t.Fatalf("release by %d: %v %v", session, resp, err)
		}
	}
	release(holder, 2)
	last := first.Grant.Token
	for i, want := range waiters {
		r := <-results
		if r.err != nil || !r.resp.Granted {
			t.Fatalf("waiter %d: %v %v", i, r.resp, r.err)
		}
		if r.session != want {
			t.Fatalf("grant %d went to session %d, want %d (arrival order)", i, r.session, want)
		}
		if r.resp.Grant.Token <= last {
			t.Fatalf("grant %d Token()=%d, want above %d", i, r.resp.Grant.Token, last)
		}
		last = r.resp.Grant.Token
		release(r.session, 2)
	}
}

// A waiter whose session expires while it waits is never granted
// (etcd#11456): its call fails with NotFound and the lock goes to the next
// live waiter.
func TestAcquire_WaiterWhoseSessionExpiresIsNeverGranted(t *testing.T) {
	a := newAPI(t)
	holder := a.session(t, 30000)
	a.acquire(t, "x", holder, 1, 0)
	doomed := a.session(t, 300) // never kept alive
	live := a.session(t, 30000)

	doomedErr := make(chan error, 1)
	go func() {
		_, err := a.acquire(t, "x", doomed, 1, 20000)
		doomedErr <- err
	}()
	waitFor(t, "doomed queued", func() bool { return len(a.describe(t, "x").Waiters) == 1 })
	liveResp := make(chan *fencedv1.AcquireResponse, 1)
	go func() {
		resp, _ := a.acquire(t, "x", live, 1, 20000)
		liveResp <- resp
	}()
	waitFor(t, "live queued", func() bool { return len(a.describe(t, "x").Waiters) == 2 })

	err := <-doomedErr
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("waiting acquire of an expired session: %v, want NotFound", err)
	}
	a.locks.Release(context.Background(), connect.NewRequest(&fencedv1.ReleaseRequest{Name: "x", Session: holder, Secret: secretOf(holder), Seq: 2}))
	resp := <-liveResp
	if resp == nil || !resp.Granted || resp.Grant.Session != live {
		t.Fatalf("after release: %v, want the grant to the live waiter %d", resp, live)
	}
}

// One keep-alive renews the session and so every grant of it; without
// keep-alives the session expires and its lock is free again.
func TestKeepAlive_RenewsSessionAndItsGrants(t *testing.T) {
	a := newAPI(t)
	s := a.session(t, 400)
	a.acquire(t, "k", s, 1, 0)
	a.acquire(t, "l", s, 2, 0)
	stream := a.sessions.KeepAlive(context.Background())
	for i := 0; i < 12; i++ { // 1.2s, three TTLs
		if err := stream.Send(&fencedv1.KeepAliveRequest{Session: s, Secret: secretOf(s), Nonce: uint64(i)}); err != nil {
			t.Fatalf("send keep-alive: %v", err)
		}
		resp, err := stream.Receive()
		if err != nil || resp.Gone || resp.Nonce != uint64(i) || resp.TtlMs != 400 {
			t.Fatalf("keep-alive %d: %v %v", i, resp, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	stream.CloseRequest()
	stream.CloseResponse()
	for _, name := range []string{"k", "l"} {
		if got := a.describe(t, name).Holder.GetSession(); got != s {
			t.Fatalf("%s holder=%d after renewals, want %d", name, got, s)
		}
	}
	waitFor(t, "expiry", func() bool { return a.describe(t, "k").Holder == nil && a.describe(t, "l").Holder == nil })
	resp, err := a.sessions.KeepAliveOnce(context.Background(), connect.NewRequest(&fencedv1.KeepAliveRequest{Session: s, Secret: secretOf(s)}))
	if err != nil || !resp.Msg.Gone {
		t.Fatalf("keep-alive of an expired session: %v %v, want gone", resp, err)
	}
}

// Bad input gets a clear error and changes nothing.
func TestAPI_BadInputChangesNothing(t *testing.T) {
	a := newAPI(t)
	s := a.session(t, 30000)
	a.acquire(t, "held", s, 1, 0)
	status := func() string {
		resp, err := a.locks.Status(context.Background(), connect.NewRequest(&fencedv1.StatusRequest{}))
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		resp.Msg.AppliedIndex, resp.Msg.Term = 0, 0
		return resp.Msg.String()
	}
	before := status()
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		call func() error
		code connect.Code
		msg  string
	}{
		{"long name", func() error {
			_, err := a.locks.Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: strings.Repeat("n", 513), Session: s, Secret: secretOf(s), Seq: 2}))
			return err
		}, connect.CodeInvalidArgument, "longer than 512"},
		{"control character", func() error {
			_, err := a.locks.Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: "a\nb", Session: s, Secret: secretOf(s), Seq: 2}))
			return err
		}, connect.CodeInvalidArgument, "control character"},
		{"ttl too short", func() error {
			_, err := a.sessions.CreateSession(ctx, connect.NewRequest(&fencedv1.CreateSessionRequest{TtlMs: 50}))
			return err
		}, connect.CodeInvalidArgument, "ttl must be between 100ms and 24h"},
		{"per-grant ttl too long", func() error {
			_, err := a.locks.Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: "y", TtlMs: 90000000}))
			return err
		}, connect.CodeInvalidArgument, "ttl must be between"},
		// 2^58+100 ms wrapped to 100ms when converted to a time.Duration
		// before it was checked; the maximum int64 was refused as "ttl -1ms".
		{"session ttl that overflows a duration", func() error {
			_, err := a.sessions.CreateSession(ctx, connect.NewRequest(&fencedv1.CreateSessionRequest{TtlMs: 1<<58 + 100}))
			return err
		}, connect.CodeInvalidArgument, "ttl must be between 100ms and 24h, got 288230376151711844ms"},
		{"per-grant ttl that overflows a duration", func() error {
			_, err := a.locks.Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: "y", TtlMs: 1<<58 + 100}))
			return err
		}, connect.CodeInvalidArgument, "got 288230376151711844ms"},
		{"maximum int64 ttl", func() error {
			_, err := a.sessions.CreateSession(ctx, connect.NewRequest(&fencedv1.CreateSessionRequest{TtlMs: math.MaxInt64}))
			return err
		}, connect.CodeInvalidArgument, "got 9223372036854775807ms"},
		{"wait that overflows a duration", func() error {
			_, err := a.locks.Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: "y", Session: s, Seq: 2, WaitMs: 1<<58 + 100}))
			return err
		}, connect.CodeInvalidArgument, "wait must be between 0 and 24h, got 288230376151711844ms"},
		{"bidi control in a name", func() error {
			_, err := a.locks.Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: "orders‮gpj.exe", Session: s, Seq: 2}))
			return err
		}, connect.CodeInvalidArgument, "U+202E at byte 6"},
		{"zero-width space in a name", func() error {
			_, err := a.locks.Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: "he​ld", Session: s, Seq: 2}))
			return err
		}, connect.CodeInvalidArgument, "U+200B at byte 2"},
		{"no session and no ttl", func() error {
			_, err := a.locks.Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: "y"}))
			return err
		}, connect.CodeInvalidArgument, "give a session, or a ttl_ms"},
		{"wait too long", func() error {
			_, err := a.locks.Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: "y", Session: s, Secret: secretOf(s), Seq: 2, WaitMs: 90000000}))
			return err
		}, connect.CodeInvalidArgument, "wait must be between"},
		{"negative wait", func() error {
			_, err := a.locks.Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: "y", Session: s, Secret: secretOf(s), Seq: 2, WaitMs: -1}))
			return err
		}, connect.CodeInvalidArgument, "wait must be between"},
		{"unknown session", func() error {
			_, err := a.locks.Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: "y", Session: 9999, Seq: 1}))
			return err
		}, connect.CodeNotFound, "does not exist"},
		{"token above 2^63-1", func() error {
			_, err := a.locks.Verify(ctx, connect.NewRequest(&fencedv1.VerifyRequest{Name: "held", Token: 1 << 63}))
			return err
		}, connect.CodeInvalidArgument, "out of range"},
		{"token 0", func() error {
			_, err := a.locks.Verify(ctx, connect.NewRequest(&fencedv1.VerifyRequest{Name: "held", Token: 0}))
			return err
		}, connect.CodeInvalidArgument, "out of range"},
		{"oversize message", func() error {
			_, err := a.locks.Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: strings.Repeat("n", 100<<10), Session: s, Secret: secretOf(s), Seq: 2}))
			return err
		}, connect.CodeResourceExhausted, "larger than configured max"},
		{"list limit", func() error {
			_, err := a.locks.List(ctx, connect.NewRequest(&fencedv1.ListRequest{Limit: -3}))
			return err
		}, connect.CodeInvalidArgument, "limit -3 is out of range"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if connect.CodeOf(err) != tt.code || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error=%v, want %v mentioning %q", err, tt.code, tt.msg)
			}
			if after := status(); after != before {
				t.Fatalf("state changed by a refused request:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// Malformed JSON over HTTP gets a clear 400-class error.
func TestAPI_MalformedJSON(t *testing.T) {
	a := newAPI(t)
	resp, err := http.Post("http://"+a.addr+"/fenced.v1.LockService/Acquire", "application/json", strings.NewReader(`{"name": 7`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "invalid_argument") {
		t.Fatalf("malformed JSON: %d %s, want 400 invalid_argument", resp.StatusCode, body)
	}
}

// The JSON API carries tokens and sessions as decimal strings.
func TestAPI_JSONTokensAreStrings(t *testing.T) {
	a := newAPI(t)
	resp, err := http.Post("http://"+a.addr+"/fenced.v1.LockService/Acquire", "application/json", strings.NewReader(`{"name":"j","ttlMs":"5000"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"token":"`) {
		t.Fatalf("JSON acquire: %d %s, want a token as a string", resp.StatusCode, body)
	}
}

func TestServer_MetricsAndHealth(t *testing.T) {
	a := newAPI(t)
	s := a.session(t, 30000)
	a.acquire(t, "m", s, 1, 0)
	for path, want := range map[string]string{
		"/metrics": "fenced_grants_total 1",
		"/healthz": "ok",
		"/readyz":  "ok: leader",
	} {
		resp, err := http.Get("http://" + a.addr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d, want 200 containing %q", path, resp.StatusCode, want)
		}
	}
}

// fenced_session_renewals_total counts the keep-alives that renewed a
// session: not those refused for a wrong secret, nor those of a session
// that is gone.
func TestServer_SessionRenewalsCounted(t *testing.T) {
	a := newAPI(t)
	s := a.session(t, 30000)
	ctx := context.Background()
	for range 3 {
		if _, err := a.sessions.KeepAliveOnce(ctx, connect.NewRequest(&fencedv1.KeepAliveRequest{Session: s, Secret: secretOf(s)})); err != nil {
			t.Fatal(err)
		}
	}
	_, err := a.sessions.KeepAliveOnce(ctx, connect.NewRequest(&fencedv1.KeepAliveRequest{Session: s, Secret: wrongSecret}))
	notOwner(t, "keep-alive with a wrong secret", err)
	gone := s + 1000
	if resp, err := a.sessions.KeepAliveOnce(ctx, connect.NewRequest(&fencedv1.KeepAliveRequest{Session: gone, Secret: secretOf(gone)})); err == nil && !resp.Msg.Gone {
		t.Fatalf("keep-alive of a session that never existed: %v, want gone or an error", resp.Msg)
	}
	if got := metric(t, a.addr, "fenced_session_renewals_total"); got != "3" {
		t.Errorf("fenced_session_renewals_total %s, want 3", got)
	}
}
