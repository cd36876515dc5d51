package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/internal/testserver"
	"github.com/fenced-dev/fenced/internal/wire"
	"github.com/fenced-dev/fenced/internal/wire/wireconnect"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
	"github.com/fenced-dev/fenced/server"
)

// Tokens of the test identities.
const (
	adminToken  = "admin-token-0123456789abcdef0123456789abcdef"
	appToken    = "app-token-0123456789abcdef0123456789abcdef"
	readerToken = "reader-token-0123456789abcdef0123456789abcdef"
)

// authLine is the auth-file line of an identity.
func authLine(t *testing.T, name, token string, roles ...server.AuthRole) string {
	t.Helper()
	b, err := json.Marshal(server.AuthEntry{Name: name, SHA256: server.TokenHash(token), Roles: roles})
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

// writeAuthFile writes an auth file of admin (everything on every name),
// app (acquire, read, kv-write on orders/) and reader (read on orders/).
func writeAuthFile(t *testing.T, path string) {
	t.Helper()
	data := "# test identities\n" +
		authLine(t, "admin", adminToken, server.AuthRole{Prefix: "", Permissions: []string{"admin", "read", "acquire", "kv-write"}}) +
		authLine(t, "app", appToken, server.AuthRole{Prefix: "orders/", Permissions: []string{"acquire", "read", "kv-write"}}) +
		"\n" +
		authLine(t, "reader", readerToken, server.AuthRole{Prefix: "orders/", Permissions: []string{"read"}})
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// bearer sends a bearer token ("" sends none) over h2c.
type bearer struct {
	token string
	h2c   http.Transport
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.h2c.RoundTrip(r)
}

type authAPI struct {
	hc       *http.Client
	base     string
	sessions fencedv1connect.SessionServiceClient
	locks    fencedv1connect.LockServiceClient
	cluster  fencedv1connect.ClusterServiceClient
}

func asIdentity(addr, token string) *authAPI {
	b := &bearer{token: token}
	b.h2c.Protocols = new(http.Protocols)
	b.h2c.Protocols.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: b}
	base := "http://" + addr
	return &authAPI{hc: hc, base: base,
		sessions: fencedv1connect.NewSessionServiceClient(hc, base),
		locks:    fencedv1connect.NewLockServiceClient(hc, base),
		cluster:  fencedv1connect.NewClusterServiceClient(hc, base)}
}

func (a *authAPI) session(t *testing.T) (uint64, string) {
	t.Helper()
	r, err := a.sessions.CreateSession(context.Background(), connect.NewRequest(&fencedv1.CreateSessionRequest{TtlMs: 30000}))
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	return r.Msg.Session, r.Msg.Secret
}

func (a *authAPI) acquire(name string, session uint64, secret string) (*fencedv1.AcquireResponse, error) {
	r, err := a.locks.Acquire(context.Background(), connect.NewRequest(&fencedv1.AcquireRequest{Name: name, Session: session, Secret: secret}))
	if err != nil {
		return nil, err
	}
	return r.Msg, nil
}

// denied fails unless err is a PermissionDenied that decodes to
// fence.ErrPermissionDenied and names each of words.
func denied(t *testing.T, what string, err error, words ...string) {
	t.Helper()
	if connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("%s: %v, want PermissionDenied", what, err)
	}
	if !errors.Is(wireconnect.Decode(err, wire.Call{}), fence.ErrPermissionDenied) {
		t.Fatalf("%s: %v does not decode to fence.ErrPermissionDenied", what, err)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("%s: %v does not name %q", what, err, w)
		}
	}
}

func startAuth(t *testing.T) (*testserver.Server, string, string) {
	dir := t.TempDir()
	authFile, auditFile := filepath.Join(dir, "auth.jsonl"), filepath.Join(dir, "audit.jsonl")
	writeAuthFile(t, authFile)
	srv := testserver.Start(t, func(c *server.Config) {
		c.AuthFile = authFile
		c.Audit = server.AuditConfig{File: auditFile}
	})
	return srv, authFile, auditFile
}

func TestAuth_UnauthenticatedAndWrongTokenRefused(t *testing.T) {
	srv, _, auditFile := startAuth(t)
	for name, token := range map[string]string{"no token": "", "wrong token": "not-a-token", "admin's token with a space": " " + adminToken} {
		a := asIdentity(srv.Addr(), token)
		_, err := a.sessions.CreateSession(context.Background(), connect.NewRequest(&fencedv1.CreateSessionRequest{TtlMs: 30000}))
		if connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Fatalf("%s: CreateSession: %v, want Unauthenticated", name, err)
		}
		_, err = a.locks.Status(context.Background(), connect.NewRequest(&fencedv1.StatusRequest{}))
		if connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Fatalf("%s: Status: %v, want Unauthenticated", name, err)
		}
	}
	// The scheme is case-insensitive; a header sent twice is refused.
	for _, h := range [][]string{{"bearer " + readerToken}, {"Bearer " + readerToken, "Bearer " + readerToken}} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+srv.Addr()+"/v1/kv/orders/none", nil)
		req.Header["Authorization"] = h
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := map[bool]int{true: http.StatusNotFound, false: http.StatusUnauthorized}[len(h) == 1]; resp.StatusCode != want {
			t.Fatalf("Authorization %q: %d, want %d", h, resp.StatusCode, want)
		}
	}
	// Health stays open.
	resp, err := http.Get("http://" + srv.Addr() + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz without a token: %v %v", resp, err)
	}
	resp.Body.Close()
	st, err := asIdentity(srv.Addr(), adminToken).locks.Status(context.Background(), connect.NewRequest(&fencedv1.StatusRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Msg.Sessions) != 0 {
		t.Fatalf("refused creates made sessions: %v", st.Msg.Sessions)
	}
	if !testserver.AuditHas(t, auditFile, map[string]string{"event": "authentication-failed", "procedure": fencedv1connect.SessionServiceCreateSessionProcedure, "outcome": "refused"}) {
		t.Fatal("audit log has no authentication failure")
	}
}

func TestAuth_PrefixesAndPermissions(t *testing.T) {
	srv, _, auditFile := startAuth(t)
	app, admin, reader := asIdentity(srv.Addr(), appToken), asIdentity(srv.Addr(), adminToken), asIdentity(srv.Addr(), readerToken)
	ctx := context.Background()

	sess, secret := app.session(t)
	if _, err := app.acquire("orders/1", sess, secret); err != nil {
		t.Fatalf("app acquires orders/1: %v", err)
	}
	_, err := app.acquire("billing/x", sess, secret)
	denied(t, "app acquires billing/x", err, `"app"`, `"acquire"`, `"billing/x"`)
	d, err := admin.locks.Describe(ctx, connect.NewRequest(&fencedv1.DescribeRequest{Name: "billing/x"}))
	if err != nil {
		t.Fatal(err)
	}
	if d.Msg.Lock.GetHolder() != nil {
		t.Fatalf("a denied acquire granted billing/x: %v", d.Msg.Lock)
	}

	// The reader reads orders/ but may not acquire, nor read elsewhere.
	if _, err := reader.locks.Describe(ctx, connect.NewRequest(&fencedv1.DescribeRequest{Name: "orders/1"})); err != nil {
		t.Fatalf("reader describes orders/1: %v", err)
	}
	_, err = reader.locks.Describe(ctx, connect.NewRequest(&fencedv1.DescribeRequest{Name: "billing/x"}))
	denied(t, "reader describes billing/x", err, `"read"`)
	_, err = reader.sessions.CreateSession(ctx, connect.NewRequest(&fencedv1.CreateSessionRequest{TtlMs: 30000}))
	denied(t, "reader creates a session", err, `"acquire"`)
	_, err = app.locks.Status(ctx, connect.NewRequest(&fencedv1.StatusRequest{Name: "billing/x"}))
	denied(t, "app reads the status of billing/x", err, `"read"`, `"billing/x"`)
	if _, err := app.locks.List(ctx, connect.NewRequest(&fencedv1.ListRequest{Prefix: "orders/"})); err != nil {
		t.Fatalf("app lists orders/: %v", err)
	}

	// Admin-only: revoke and the cluster API.
	_, err = app.locks.Revoke(ctx, connect.NewRequest(&fencedv1.RevokeRequest{Name: "orders/1", Reason: "test"}))
	denied(t, "app revokes", err, `"admin"`)
	_, err = app.cluster.AddMember(ctx, connect.NewRequest(&fencedv1.AddMemberRequest{Id: "n9", PeerAddr: "127.0.0.1:1"}))
	denied(t, "app adds a member", err, `"admin"`)
	_, err = app.cluster.RemoveMember(ctx, connect.NewRequest(&fencedv1.RemoveMemberRequest{Id: "n9"}))
	denied(t, "app removes a member", err, `"admin"`)
	_, err = app.cluster.RegisterNode(ctx, connect.NewRequest(&fencedv1.RegisterNodeRequest{Id: "n1", ApiAddr: "127.0.0.1:1"}))
	denied(t, "app registers a node", err, `"admin"`)
	_, err = asIdentity(srv.Addr(), "").cluster.RegisterNode(ctx, connect.NewRequest(&fencedv1.RegisterNodeRequest{Id: "n9", ApiAddr: "127.0.0.1:1"}))
	denied(t, "an anonymous RegisterNode of a non-member", err, `"n9"`)
	_, err = admin.cluster.RemoveMember(ctx, connect.NewRequest(&fencedv1.RemoveMemberRequest{Id: "n9"}))
	if connect.CodeOf(err) == connect.CodePermissionDenied {
		t.Fatalf("admin removes a member: %v", err)
	}
	rv, err := admin.locks.Revoke(ctx, connect.NewRequest(&fencedv1.RevokeRequest{Name: "orders/1", Reason: "test"}))
	if err != nil || !rv.Msg.Revoked {
		t.Fatalf("admin revokes orders/1 (no --allow-revoke needed with an auth file): %v %v", rv, err)
	}

	for _, want := range []map[string]string{
		{"event": "denied", "identity": "app", "target": "billing/x", "permission": "acquire", "outcome": "refused"},
		{"event": "denied", "identity": "app", "procedure": fencedv1connect.LockServiceRevokeProcedure, "target": "orders/1"},
		{"event": "denied", "identity": "app", "procedure": fencedv1connect.ClusterServiceAddMemberProcedure},
		{"event": "admin", "identity": "admin", "procedure": fencedv1connect.LockServiceRevokeProcedure, "target": "orders/1", "outcome": "ok", "detail": "test"},
		{"event": "admin", "identity": "admin", "procedure": fencedv1connect.ClusterServiceRemoveMemberProcedure, "target": "n9"},
	} {
		if !testserver.AuditHas(t, auditFile, want) {
			t.Errorf("audit log has no entry %v", want)
		}
	}
}

func TestAuth_PipelineCallsAuthorizedOneByOne(t *testing.T) {
	srv, _, _ := startAuth(t)
	app := asIdentity(srv.Addr(), appToken)
	sess, secret := app.session(t)
	stream := app.locks.Pipeline(context.Background())
	err := stream.Send(&fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{
		{Id: 1, Call: &fencedv1.PipelineCall_Acquire{Acquire: &fencedv1.AcquireRequest{Name: "billing/y", Session: sess, Secret: secret}}},
		{Id: 2, Call: &fencedv1.PipelineCall_Acquire{Acquire: &fencedv1.AcquireRequest{Name: "orders/2", Session: sess, Secret: secret}}},
		{Id: 3, Call: &fencedv1.PipelineCall_KvPut{KvPut: &fencedv1.KVPutRequest{Key: "billing/k", Value: []byte("v"), Token: 1}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint64]*fencedv1.PipelineResult{}
	for len(got) < 3 {
		resp, err := stream.Receive()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range resp.Results {
			got[r.Id] = r
		}
	}
	stream.CloseRequest()
	stream.CloseResponse()
	for _, id := range []uint64{1, 3} {
		if e := got[id].GetError(); e == nil || connect.Code(e.Code) != connect.CodePermissionDenied {
			t.Fatalf("pipeline call %d outside orders/: %v, want PermissionDenied", id, got[id])
		}
	}
	if got[2].GetAcquire() == nil {
		t.Fatalf("pipeline acquire of orders/2: %v", got[2])
	}
}

func TestAuth_KVHTTPWriteNeedsKVWrite(t *testing.T) {
	srv, _, _ := startAuth(t)
	put := func(token, key string) *http.Response {
		req, _ := http.NewRequest(http.MethodPut, "http://"+srv.Addr()+"/v1/kv/"+key, strings.NewReader("v"))
		req.Header.Set("X-Fencing-Token", "1")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if r := put("", "orders/k"); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("kv PUT without a token: %d, want 401", r.StatusCode)
	}
	if r := put(readerToken, "orders/k"); r.StatusCode != http.StatusForbidden {
		t.Fatalf("kv PUT by reader: %d, want 403", r.StatusCode)
	}
	if r := put(appToken, "billing/k"); r.StatusCode != http.StatusForbidden {
		t.Fatalf("kv PUT by app outside orders/: %d, want 403", r.StatusCode)
	}
	// app may write orders/k: the kv itself answers (the token is no grant
	// of the key's lock), not the authorization.
	if r := put(appToken, "orders/k"); r.StatusCode == http.StatusForbidden || r.StatusCode == http.StatusUnauthorized {
		t.Fatalf("kv PUT by app on orders/k: %d, want the kv's own answer", r.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+srv.Addr()+"/v1/kv/orders/k", nil)
	req.Header.Set("Authorization", "Bearer "+readerToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("kv GET by reader: %d, want 404 (nothing was written)", resp.StatusCode)
	}
}

func TestAuth_Reload(t *testing.T) {
	srv, authFile, _ := startAuth(t)
	newToken := "new-token-0123456789abcdef0123456789abcdef"
	status := func(token string) error {
		_, err := asIdentity(srv.Addr(), token).locks.Status(context.Background(), connect.NewRequest(&fencedv1.StatusRequest{Name: "orders/1"}))
		return err
	}
	if err := status(newToken); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("unknown token: %v", err)
	}
	// Replace app by a new identity.
	if err := os.WriteFile(authFile, []byte(authLine(t, "new", newToken, server.AuthRole{Prefix: "orders/", Permissions: []string{"read"}})), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := srv.ReloadAuth(); err != nil {
		t.Fatal(err)
	}
	if err := status(newToken); err != nil {
		t.Fatalf("new token after reload: %v", err)
	}
	if err := status(appToken); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("removed token after reload: %v", err)
	}
	// A broken file leaves the identities as they were.
	for _, bad := range []string{"not json\n", `{"name":"x","sha256":"abc","roles":[]}` + "\n",
		`{"name":"x","sha256":"` + server.TokenHash("t") + `","roles":[{"prefix":"","permissions":["root"]}]}` + "\n", ""} {
		if err := os.WriteFile(authFile, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := srv.ReloadAuth(); !errors.Is(err, fence.ErrInvalidArgument) {
			t.Fatalf("reload of %q: %v, want ErrInvalidArgument", bad, err)
		}
		if err := status(newToken); err != nil {
			t.Fatalf("after the failed reload of %q: %v", bad, err)
		}
	}
}
