package server_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fenced-dev/fenced/internal/testserver"
	"github.com/fenced-dev/fenced/internal/tlsfiles"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
	"github.com/fenced-dev/fenced/server"
)

// certLine is the auth-file line of a certificate identity.
func certLine(t *testing.T, name, cert string, roles ...server.AuthRole) string {
	t.Helper()
	b, err := json.Marshal(server.AuthEntry{Name: name, Cert: cert, Roles: roles})
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

// uriCert issues, with the CA of dir, a client certificate without a
// common name whose one URI SAN is uri (a SPIFFE SVID's shape), as
// dir/file.crt and dir/file.key.
func uriCert(t *testing.T, dir, file, uri string) {
	t.Helper()
	caCert, err := tls.LoadX509KeyPair(filepath.Join(dir, tlsfiles.CACertFile), filepath.Join(dir, tlsfiles.CAKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(uri)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{Organization: []string{"fenced"}},
		NotBefore:    time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		URIs:        []*url.URL{u},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert.Leaf, &key.PublicKey, caCert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	os.WriteFile(filepath.Join(dir, file+".crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(filepath.Join(dir, file+".key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600)
}

// certAuth is a single node with API TLS, the CA of dir, and an auth
// file of certificate identities: "app" (acquire, read on orders/), the
// SPIFFE id of "svid" (read on orders/), and a bearer-token admin.
type certAuth struct {
	srv       *testserver.Server
	dir       string
	auditFile string
}

func startCertAuth(t *testing.T, extra ...testserver.Option) *certAuth {
	t.Helper()
	dir := t.TempDir()
	if _, err := tlsfiles.InitCA(dir, time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		kind tlsfiles.Kind
		name string
	}{{tlsfiles.Node, "n1"}, {tlsfiles.Node, "n9"}, {tlsfiles.Client, "app"}, {tlsfiles.Client, "stranger"}} {
		if _, _, err := tlsfiles.Issue(dir, c.kind, c.name, nil, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	uriCert(t, dir, "svid", "spiffe://example.org/reader")
	authFile, auditFile := filepath.Join(dir, "auth.jsonl"), filepath.Join(dir, "audit.jsonl")
	data := certLine(t, "app", "app", server.AuthRole{Prefix: "orders/", Permissions: []string{"acquire", "read"}}) +
		certLine(t, "reader", "spiffe://example.org/reader", server.AuthRole{Prefix: "orders/", Permissions: []string{"read"}}) +
		authLine(t, "admin", adminToken, server.AuthRole{Prefix: "", Permissions: []string{"admin", "read", "acquire"}})
	if err := os.WriteFile(authFile, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := append([]testserver.Option{func(c *server.Config) {
		c.Raft.NodeID = "n1"
		c.TLS = tlsfiles.Files{Cert: filepath.Join(dir, "n1.crt"), Key: filepath.Join(dir, "n1.key"), CA: filepath.Join(dir, tlsfiles.CACertFile)}
		c.AuthFile = authFile
		c.Audit = server.AuditConfig{File: auditFile}
	}}, extra...)
	srv, err := testserver.LaunchTLS(t.TempDir(), dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return &certAuth{srv: srv, dir: dir, auditFile: auditFile}
}

// tlsHeaders sends extra headers on every request.
type tlsHeaders struct {
	hdr http.Header
	tr  *http.Transport
}

func (h *tlsHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.hdr {
		r.Header[k] = v
	}
	return h.tr.RoundTrip(r)
}

// as returns an API client over TLS that presents the certificate file
// (none when "") and sends hdr.
func (ca *certAuth) as(t *testing.T, file string, hdr http.Header) *authAPI {
	t.Helper()
	pool, err := tlsfiles.LoadPool(filepath.Join(ca.dir, tlsfiles.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{RootCAs: pool, ServerName: "localhost"}
	if file != "" {
		c, err := tls.LoadX509KeyPair(filepath.Join(ca.dir, file+".crt"), filepath.Join(ca.dir, file+".key"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	tr := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: &tlsHeaders{hdr: hdr, tr: tr}}
	base := "https://" + ca.srv.Addr()
	return &authAPI{hc: hc, base: base,
		sessions: fencedv1connect.NewSessionServiceClient(hc, base),
		locks:    fencedv1connect.NewLockServiceClient(hc, base),
		cluster:  fencedv1connect.NewClusterServiceClient(hc, base)}
}

// A client certificate named by a cert line is that identity: by its
// common name or, without one, by its URI SAN; it is held to the line's
// permissions like a token, and a certificate without a line, or none, is
// unauthenticated.
func TestCertAuth_CertificateIsIdentity(t *testing.T) {
	ca := startCertAuth(t)
	ctx := context.Background()
	app := ca.as(t, "app", nil)
	sess, secret := app.session(t)
	if _, err := app.acquire("orders/1", sess, secret); err != nil {
		t.Fatalf("app certificate acquires orders/1: %v", err)
	}
	_, err := app.acquire("billing/1", sess, secret)
	denied(t, "app certificate acquires billing/1", err, `"app"`, `"acquire"`, `"billing/1"`)

	reader := ca.as(t, "svid", nil)
	if _, err := reader.locks.Describe(ctx, connect.NewRequest(&fencedv1.DescribeRequest{Name: "orders/1"})); err != nil {
		t.Fatalf("URI-SAN certificate reads orders/1: %v", err)
	}
	_, err = reader.sessions.CreateSession(ctx, connect.NewRequest(&fencedv1.CreateSessionRequest{TtlMs: 30000}))
	denied(t, "URI-SAN certificate creates a session", err, `"reader"`, `"acquire"`)

	for name, file := range map[string]string{"a certificate without a cert line": "stranger", "no certificate": ""} {
		_, err := ca.as(t, file, nil).locks.Status(ctx, connect.NewRequest(&fencedv1.StatusRequest{}))
		if connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Fatalf("%s: Status: %v, want Unauthenticated", name, err)
		}
	}
	// A bearer token decides over the certificate it comes with.
	both := ca.as(t, "app", http.Header{"Authorization": {"Bearer " + adminToken}})
	if _, err := both.locks.Describe(ctx, connect.NewRequest(&fencedv1.DescribeRequest{Name: "billing/1"})); err != nil {
		t.Fatalf("admin token with the app certificate reads billing/1: %v", err)
	}
	if !testserver.AuditHas(t, ca.auditFile, map[string]string{"event": "denied", "identity": "app", "target": "billing/1", "permission": "acquire"}) {
		t.Fatal("the certificate identity's denial is not audited")
	}
}

// The forwarded client identity header is believed only from a current
// member's node certificate (here the node's own, as a follower would
// present it); from a client certificate, a node certificate of the CA
// that is no member, or without a certificate, it is 401 and audited, and
// the call does nothing.
func TestCertAuth_ForgedForwardedIdentityRefused(t *testing.T) {
	ca := startCertAuth(t)
	ctx := context.Background()
	claim := http.Header{"X-Fenced-Client-Identity": {"app"}}
	for name, file := range map[string]string{"client certificate": "stranger", "the app's own certificate": "app", "node certificate of no member": "n9", "no certificate": ""} {
		_, err := ca.as(t, file, claim).sessions.CreateSession(ctx, connect.NewRequest(&fencedv1.CreateSessionRequest{TtlMs: 30000}))
		if connect.CodeOf(err) != connect.CodeUnauthenticated || !strings.Contains(err.Error(), "X-Fenced-Client-Identity") {
			t.Fatalf("%s claiming app: %v, want Unauthenticated naming the header", name, err)
		}
	}
	// A token does not make the header believable either.
	_, err := ca.as(t, "", http.Header{"X-Fenced-Client-Identity": {"app"}, "Authorization": {"Bearer " + adminToken}}).locks.Status(ctx, connect.NewRequest(&fencedv1.StatusRequest{}))
	if connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("admin token with a forged identity: %v, want Unauthenticated", err)
	}
	st, err := ca.as(t, "", http.Header{"Authorization": {"Bearer " + adminToken}}).locks.Status(ctx, connect.NewRequest(&fencedv1.StatusRequest{}))
	if err != nil || len(st.Msg.Sessions) != 0 {
		t.Fatalf("forged calls made sessions: %v %v", st, err)
	}
	if !testserver.AuditHas(t, ca.auditFile, map[string]string{"event": "authentication-failed", "procedure": fencedv1connect.SessionServiceCreateSessionProcedure, "outcome": "refused"}) {
		t.Fatal("the forged identity is not audited")
	}

	// From a member's node certificate the header is the identity, with
	// that identity's permissions, not the member's.
	member := ca.as(t, "n1", claim)
	sess, secret := member.session(t)
	if _, err := member.acquire("orders/2", sess, secret); err != nil {
		t.Fatalf("member forwarding app acquires orders/2: %v", err)
	}
	_, err = member.acquire("billing/2", sess, secret)
	denied(t, "member forwarding app acquires billing/2", err, `"app"`, `"billing/2"`)
	_, err = ca.as(t, "n1", http.Header{"X-Fenced-Client-Identity": {"nobody"}}).locks.Status(ctx, connect.NewRequest(&fencedv1.StatusRequest{}))
	if connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("member forwarding an identity without a cert line: %v, want Unauthenticated", err)
	}
}

// --require-client-cert refuses a TLS handshake without a client
// certificate of the CA, on every path.
func TestCertAuth_RequireClientCert(t *testing.T) {
	ca := startCertAuth(t, func(c *server.Config) { c.RequireClientCert = true })
	ctx := context.Background()
	if _, err := ca.as(t, "", nil).locks.Status(ctx, connect.NewRequest(&fencedv1.StatusRequest{})); err == nil || connect.CodeOf(err) == connect.CodeUnauthenticated {
		t.Fatalf("Status without a client certificate: %v, want a failed handshake", err)
	}
	if resp, err := ca.as(t, "", nil).hc.Get("https://" + ca.srv.Addr() + "/healthz"); err == nil {
		resp.Body.Close()
		t.Fatalf("/healthz without a client certificate: %d, want a failed handshake", resp.StatusCode)
	}
	if _, err := ca.as(t, "svid", nil).locks.Describe(ctx, connect.NewRequest(&fencedv1.DescribeRequest{Name: "orders/1"})); err != nil {
		t.Fatalf("with a client certificate: %v", err)
	}
	cfg := server.DefaultConfig()
	cfg.RequireClientCert = true
	cfg.TLS = tlsfiles.Files{Cert: "n1.crt", Key: "n1.key"}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--ca") {
		t.Fatalf("require client certificates without a CA: %v, want an error naming --ca", err)
	}
}

// A bad cert line is refused and names why; a line is a token or a
// certificate, not both.
func TestCertAuth_BadLines(t *testing.T) {
	for _, line := range []string{
		`{"name":"x","cert":"app","sha256":"` + server.TokenHash("t") + `","roles":[]}`,
		`{"name":"x","cert":"a\u0001b","roles":[]}`,
		`{"name":"x","cert":"` + strings.Repeat("a", 1025) + `","roles":[]}`,
		`{"name":"x","roles":[]}`,
		`{"name":"x","cert":"app"}` + "\n" + `{"name":"y","cert":"app"}`,
	} {
		if err := server.CheckAuthLine([]byte(line)); err == nil {
			t.Errorf("%s: accepted", line)
		}
	}
	if err := server.CheckAuthLine([]byte(`{"name":"x","cert":"spiffe://example.org/x","roles":[{"prefix":"","permissions":["read"]}]}`)); err != nil {
		t.Fatal(err)
	}
}

// A member registers by its node certificate; a client certificate with
// the member's name (client use only) does not count.
func TestCertAuth_RegisterNodeNeedsNodeCertificate(t *testing.T) {
	ca := startCertAuth(t)
	impostor := filepath.Join(ca.dir, "impostor")
	for _, f := range []string{tlsfiles.CACertFile, tlsfiles.CAKeyFile} {
		b, err := os.ReadFile(filepath.Join(ca.dir, f))
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(impostor, 0o700)
		os.WriteFile(filepath.Join(impostor, f), b, 0o600)
	}
	if _, _, err := tlsfiles.Issue(impostor, tlsfiles.Client, "n1", nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"n1.crt", "n1.key"} {
		b, _ := os.ReadFile(filepath.Join(impostor, f))
		os.WriteFile(filepath.Join(ca.dir, "client-"+f), b, 0o600)
	}
	ctx := context.Background()
	req := func() *connect.Request[fencedv1.RegisterNodeRequest] {
		return connect.NewRequest(&fencedv1.RegisterNodeRequest{Id: "n1", ApiAddr: "127.0.0.1:1"})
	}
	_, err := ca.as(t, "client-n1", nil).cluster.RegisterNode(ctx, req())
	denied(t, "a client certificate named n1 registers n1", err, `"n1"`)
	if _, err := ca.as(t, "n1", nil).cluster.RegisterNode(ctx, connect.NewRequest(&fencedv1.RegisterNodeRequest{Id: "n1", ApiAddr: ca.srv.Addr()})); err != nil {
		t.Fatalf("n1's node certificate registers n1: %v", err)
	}
}
