package server_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/internal/wire"
	"github.com/fenced-dev/fenced/internal/wire/wireconnect"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/server"
)

// wrongSecret has the form of a secret (32 hexadecimal digits) but is
// nobody's.
const wrongSecret = "00112233445566778899aabbccddeeff"

// state returns the server's view without the fields that move by
// themselves, to tell whether a request changed anything.
func (a *api) state(t *testing.T) string {
	t.Helper()
	resp, err := a.locks.Status(context.Background(), connect.NewRequest(&fencedv1.StatusRequest{}))
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	resp.Msg.AppliedIndex, resp.Msg.Term = 0, 0
	return resp.Msg.String()
}

// notOwner fails the test unless err is the server's refusal of a request
// without the session's secret: PermissionDenied, decoded by the SDK's
// codec as fence.ErrNotOwner.
func notOwner(t *testing.T, what string, err error) {
	t.Helper()
	if connect.CodeOf(err) != connect.CodePermissionDenied || !errors.Is(wireconnect.Decode(err, wire.Call{}), fence.ErrNotOwner) {
		t.Errorf("%s: %v, want PermissionDenied (not the session's owner)", what, err)
	}
}

// Knowing a session's id is not enough to act for it: every request that
// names the victim's session without its secret (none, or a wrong one of
// the right length) is refused and changes nothing; the victim still holds
// its lock with the same token, and the owner's own requests work.
func TestSecret_SessionHijackByIDFails(t *testing.T) {
	a := newAPI(t)
	victim := a.session(t, 30000)
	grant, err := a.acquire(t, "victim-lock", victim, 1, 0)
	if err != nil || !grant.Granted {
		t.Fatalf("victim's acquire: %v %v", grant, err)
	}
	// A waiter, so that a hijacked release or close would be visible as a
	// grant to it.
	waiter := a.session(t, 30000)
	go a.acquire(t, "victim-lock", waiter, 1, 30000)
	waitFor(t, "the waiter to queue", func() bool { return len(a.describe(t, "victim-lock").Waiters) == 1 })
	before := a.state(t)
	ctx := context.Background()

	for _, secret := range []string{"", wrongSecret} {
		_, err := a.sessions.KeepAliveOnce(ctx, connect.NewRequest(&fencedv1.KeepAliveRequest{Session: victim, Secret: secret}))
		notOwner(t, "keep-alive", err)
		_, err = a.locks.Release(ctx, connect.NewRequest(&fencedv1.ReleaseRequest{Name: "victim-lock", Session: victim, Seq: 9, Secret: secret}))
		notOwner(t, "release", err)
		_, err = a.sessions.CloseSession(ctx, connect.NewRequest(&fencedv1.CloseSessionRequest{Session: victim, Secret: secret}))
		notOwner(t, "close", err)
		// Acquiring the victim's own lock for its session would hand the
		// attacker the victim's grant.
		_, err = a.locks.Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: "victim-lock", Session: victim, Seq: 1, Secret: secret}))
		notOwner(t, "acquire of the victim's lock on its behalf", err)
		_, err = a.locks.Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: "other", Session: victim, Seq: 10, Secret: secret}))
		notOwner(t, "acquire on behalf", err)

		p := a.pipeline(t)
		p.send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{
			{Id: 1, Call: &fencedv1.PipelineCall_Acquire{Acquire: &fencedv1.AcquireRequest{Name: "victim-lock", Session: victim, Seq: 1, Secret: secret}}},
			{Id: 2, Call: &fencedv1.PipelineCall_Release{Release: &fencedv1.ReleaseRequest{Name: "victim-lock", Session: victim, Seq: 11, Secret: secret}}},
		}})
		for id, r := range p.results(2) {
			if e := r.GetError(); e == nil || connect.Code(e.Code) != connect.CodePermissionDenied || e.Meta[wire.HeaderReason] != wire.ReasonNotOwner {
				t.Errorf("pipeline call %d: %v, want PermissionDenied (not-owner)", id, r)
			}
		}

		stream := a.sessions.KeepAlive(ctx)
		if err := stream.Send(&fencedv1.KeepAliveRequest{Session: victim, Nonce: 1, Secret: secret}); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Receive()
		if err != nil || !resp.NotOwner || resp.Gone || resp.TtlMs != 0 {
			t.Errorf("keep-alive stream: %v %v, want a not_owner answer", resp, err)
		}
		stream.CloseRequest()
		stream.CloseResponse()

		if after := a.state(t); after != before {
			t.Fatalf("secret %q: a refused request changed the state:\nbefore %s\nafter  %s", secret, before, after)
		}
	}
	if _, err := a.locks.Release(ctx, connect.NewRequest(&fencedv1.ReleaseRequest{Name: "victim-lock", Session: victim, Seq: 9, Secret: "not hex"})); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("malformed secret: %v, want InvalidArgument", err)
	}
	if h := a.describe(t, "victim-lock").Holder; h.GetSession() != victim || h.GetToken() != grant.Grant.Token {
		t.Fatalf("after the attacks the lock is held by %v, want session %d with token %d", h, victim, grant.Grant.Token)
	}

	// The owner, with its secret, is served.
	if _, err := a.sessions.KeepAliveOnce(ctx, connect.NewRequest(&fencedv1.KeepAliveRequest{Session: victim, Secret: secretOf(victim)})); err != nil {
		t.Fatalf("owner's keep-alive: %v", err)
	}
	resp, err := a.locks.Release(ctx, connect.NewRequest(&fencedv1.ReleaseRequest{Name: "victim-lock", Session: victim, Seq: 2, Secret: secretOf(victim)}))
	if err != nil || resp.Msg.Result != fencedv1.ReleaseResult_RELEASE_RESULT_RELEASED {
		t.Fatalf("owner's release: %v %v", resp, err)
	}
}

// The secret a create returns is the one the client sent; a retry with the
// same request id gets the same session only with the same secret.
func TestSecret_CreateRetriedWithTheSameSecret(t *testing.T) {
	a := newAPI(t)
	ctx := context.Background()
	const mine = "0f0e0d0c0b0a09080706050403020100"
	create := func(secret string) (*fencedv1.CreateSessionResponse, error) {
		r, err := a.sessions.CreateSession(ctx, connect.NewRequest(&fencedv1.CreateSessionRequest{TtlMs: 30000, RequestId: "job-1", Secret: secret}))
		if err != nil {
			return nil, err
		}
		return r.Msg, nil
	}
	first, err := create(mine)
	if err != nil || first.Secret != mine {
		t.Fatalf("create: %v %v", first, err)
	}
	if again, err := create(mine); err != nil || again.Session != first.Session {
		t.Fatalf("retry: %v %v, want session %d", again, err, first.Session)
	}
	for _, other := range []string{wrongSecret, ""} {
		_, err := create(other)
		notOwner(t, "a retry with another secret", err)
	}
	r, err := a.sessions.CreateSession(ctx, connect.NewRequest(&fencedv1.CreateSessionRequest{TtlMs: 30000}))
	if err != nil || len(r.Msg.Secret) != 32 {
		t.Fatalf("create without a secret: %v %v, want one generated", r, err)
	}
	// A per-grant acquire returns the secret of its session.
	g, err := a.locks.Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: "p", TtlMs: 30000}))
	if err != nil || !g.Msg.Granted || len(g.Msg.Secret) != 32 {
		t.Fatalf("per-grant acquire: %v %v, want a grant with its session's secret", g, err)
	}
	rel, err := a.locks.Release(ctx, connect.NewRequest(&fencedv1.ReleaseRequest{Name: "p", Session: g.Msg.Grant.Session, Seq: 2, Secret: g.Msg.Secret}))
	if err != nil || rel.Msg.Result != fencedv1.ReleaseResult_RELEASE_RESULT_RELEASED {
		t.Fatalf("release with the per-grant secret: %v %v", rel, err)
	}
}

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Revoke is refused unless the server allows it. When allowed, it ends the
// holder's session, tells the holder's KeepAlive stream at once, hands the
// lock to the waiter with a higher token, and is logged at WARN.
func TestRevoke_EndsHolderPushesLossAndLogs(t *testing.T) {
	ctx := context.Background()
	off := newAPI(t)
	_, err := off.locks.Revoke(ctx, connect.NewRequest(&fencedv1.RevokeRequest{Name: "x"}))
	if connect.CodeOf(err) != connect.CodePermissionDenied || !strings.Contains(err.Error(), "--allow-revoke") {
		t.Fatalf("revoke on a server without --allow-revoke: %v, want PermissionDenied", err)
	}

	var logs syncBuffer
	a := newAPI(t, func(c *server.Config) {
		c.AllowRevoke = true
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	holder, waiter := a.session(t, 30000), a.session(t, 30000)
	g, _ := a.acquire(t, "x", holder, 1, 0)
	granted := make(chan *fencedv1.AcquireResponse, 1)
	go func() {
		r, _ := a.acquire(t, "x", waiter, 1, 30000)
		granted <- r
	}()
	waitFor(t, "the waiter to queue", func() bool { return len(a.describe(t, "x").Waiters) == 1 })
	stream := a.sessions.KeepAlive(ctx)
	defer stream.CloseResponse()
	if err := stream.Send(&fencedv1.KeepAliveRequest{Session: holder, Nonce: 1, Secret: secretOf(holder)}); err != nil {
		t.Fatal(err)
	}
	if r, err := stream.Receive(); err != nil || r.TtlMs == 0 {
		t.Fatalf("renewal: %v %v", r, err)
	}

	if r, err := a.locks.Revoke(ctx, connect.NewRequest(&fencedv1.RevokeRequest{Name: "x", Token: g.Grant.Token + 1, Reason: "wrong token"})); err != nil || r.Msg.Revoked {
		t.Fatalf("revoke of another token: %v %v, want nothing revoked", r, err)
	}
	r, err := a.locks.Revoke(ctx, connect.NewRequest(&fencedv1.RevokeRequest{Name: "x", Reason: "stuck job"}))
	if err != nil || !r.Msg.Revoked || r.Msg.Grant.Session != holder || r.Msg.Grant.Token != g.Grant.Token {
		t.Fatalf("revoke: %v %v", r, err)
	}
	pushed := make(chan *fencedv1.KeepAliveResponse, 1)
	go func() {
		r, _ := stream.Receive()
		pushed <- r
	}()
	select {
	case p := <-pushed:
		if p == nil || p.Session != holder || !p.Gone || !p.Revoked || p.Nonce != 0 {
			t.Fatalf("pushed %v, want session %d gone and revoked", p, holder)
		}
	case <-time.After(time.Second):
		t.Fatal("the revocation was not pushed to the holder's KeepAlive stream within 1s")
	}
	next := <-granted
	if next == nil || !next.Granted || next.Grant.Token <= g.Grant.Token {
		t.Fatalf("the waiter got %v, want a grant with a token above %d", next, g.Grant.Token)
	}
	log := logs.String()
	for _, want := range []string{"level=WARN", "lock revoked", "name=x", "reason=\"stuck job\"", "token=" + strconv.FormatUint(g.Grant.Token, 10), "session=" + strconv.FormatUint(holder, 10), "caller=127.0.0.1:"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
}
