package main_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/internal/proctest"
	"github.com/fenced-dev/fenced/internal/testserver"
	"github.com/fenced-dev/fenced/internal/tlsfiles"
)

// appendAuth runs `fenced auth cert` with args and appends its line to
// authFile.
func appendAuth(t *testing.T, authFile string, args ...string) {
	t.Helper()
	out, errOut, code := runFenced(t, append([]string{"auth", "cert"}, args...)...)
	if code != 0 {
		t.Fatalf("auth cert %v: exit %d %q %s", args, code, out, errOut)
	}
	f, err := os.OpenFile(authFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(out); err != nil {
		t.Fatal(err)
	}
}

// A 3-node cluster with mutual TLS on the API (--require-client-cert) and
// certificate identities: an application certificate acquires through a
// follower (which forwards the identity it verified, vouched for by its
// node certificate); a certificate whose line lacks the permission is
// denied through the follower with the permission and name; a forged
// forwarded-identity header, to a follower or the leader, from a client
// certificate or a node certificate of no member, is 401 and audited and
// changes nothing; a connection without a certificate gets no handshake.
func TestCertAuthCluster_MutualTLS(t *testing.T) {
	dir := t.TempDir()
	authFile, auditFile := filepath.Join(dir, "auth.jsonl"), filepath.Join(dir, "audit.jsonl")
	admin := newToken(t, authFile, "admin", "=admin,read,acquire,kv-write")
	appendAuth(t, authFile, "--name", "app", "--identity", "app", "--role", "orders/=acquire,read")
	servers, certs := proctest.StartClusterTLS(t, 3, append([]string{"--auth-file", authFile, "--audit-log", auditFile, "--require-client-cert"}, stableLeader...)...)
	for _, name := range []string{"app", "other"} {
		if _, _, err := tlsfiles.Issue(certs, tlsfiles.Client, name, nil, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := tlsfiles.Issue(certs, tlsfiles.Node, "n9", nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	ca := "FENCED_CA=" + filepath.Join(certs, tlsfiles.CACertFile)
	withCert := func(name string, env ...string) []string {
		return append([]string{ca, "FENCED_CERT=" + filepath.Join(certs, name+".crt"), "FENCED_KEY=" + filepath.Join(certs, name+".key")}, env...)
	}
	adminEnv := withCert("other", admin...) // the token decides
	leader, followers := leaderOfEnv(t, adminEnv, servers)
	via := followers[0].Addr

	// "other" gets its line from its certificate file; SIGHUP loads it.
	appendAuth(t, authFile, "--name", "other", "--cert", filepath.Join(certs, "other.crt"), "--role", "billing/=acquire,read")
	for _, s := range servers {
		if err := s.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the other certificate's line loaded", 10*time.Second, func() bool {
		_, _, code := runFencedEnv(t, withCert("other"), "acquire", "billing/1", "--ttl", "5s", "--endpoints", via)
		return code == 0
	})
	before := statusVia(t, adminEnv, leader.Addr)

	if out, errOut, code := runFencedEnv(t, withCert("app"), "acquire", "orders/x", "--ttl", "30s", "--endpoints", via); code != 0 || !strings.Contains(out, "granted token") {
		t.Fatalf("app certificate acquires orders/x through a follower: exit %d %q %s", code, out, errOut)
	}
	out, errOut, code := runFencedEnv(t, withCert("other"), "acquire", "orders/x", "--ttl", "5s", "--endpoints", via)
	if code == 0 || !strings.Contains(errOut, `identity "other" has no "acquire" permission on "orders/x"`) {
		t.Fatalf("other certificate acquires orders/x through a follower: exit %d %q %s", code, out, errOut)
	}
	if !testserver.AuditHas(t, auditFile, map[string]string{"event": "denied", "identity": "other", "target": "orders/x", "permission": "acquire", "node": leader.NodeID}) {
		t.Fatal("the leader's audit entry of the forwarded certificate identity's denial is missing")
	}
	if out, errOut, code := runFencedEnv(t, []string{ca}, "status", "--endpoints", via, "--timeout", "2s"); code == 0 {
		t.Fatalf("status without a client certificate: exit 0 %q %s", out, errOut)
	}

	// Forged forwarded identities.
	pool, err := tlsfiles.LoadPool(filepath.Join(certs, tlsfiles.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, from := range []string{"other", "n9"} {
		pair, err := tls.LoadX509KeyPair(filepath.Join(certs, from+".crt"), filepath.Join(certs, from+".key"))
		if err != nil {
			t.Fatal(err)
		}
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}, ForceAttemptHTTP2: true}
		defer tr.CloseIdleConnections()
		for _, to := range []string{via, leader.Addr} {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+to+"/fenced.v1.LockService/Acquire", strings.NewReader(`{"name":"orders/x","ttlMs":"5000"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Fenced-Client-Identity", "app")
			req.Header.Set("X-Fenced-Forwarded-By", followers[1].NodeID)
			resp, err := tr.RoundTrip(req)
			cancel()
			if err != nil {
				t.Fatalf("%s to %s: %v", from, to, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("%s claiming app to %s: HTTP %d, want 401", from, to, resp.StatusCode)
			}
		}
	}
	if !testserver.AuditHas(t, auditFile, map[string]string{"event": "authentication-failed", "procedure": "/fenced.v1.LockService/Acquire", "outcome": "refused", "node": leader.NodeID}) {
		t.Fatal("the forged identity at the leader is not audited")
	}
	after := statusVia(t, adminEnv, leader.Addr)
	// One grant (orders/x, the app's) since before: the denied and forged
	// calls took none.
	if after.Leader != before.Leader || after.LastToken != before.LastToken+1 {
		t.Fatalf("status before %+v, after %+v: a denied or forged call changed something", before, after)
	}
}

// fenced auth cert refuses bad input with exit 2 and a reason, and prints
// nothing then.
func TestAuthCert_BadInput(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.crt")
	os.WriteFile(junk, []byte("not a certificate"), 0o600)
	for _, args := range [][]string{
		{"--name", "a", "--role", "=read"},
		{"--name", "a", "--identity", "a", "--cert", junk, "--role", "=read"},
		{"--name", "a", "--cert", junk, "--role", "=read"},
		{"--name", "a", "--cert", filepath.Join(dir, "missing.crt"), "--role", "=read"},
		{"--name", "a", "--identity", "a", "--role", "=fly"},
		{"--name", "a", "--identity", "a", "--role", "read"},
		{"--identity", "a", "--role", "=read"},
	} {
		out, errOut, code := runFenced(t, append([]string{"auth", "cert"}, args...)...)
		if code != 2 || out != "" || errOut == "" {
			t.Errorf("auth cert %v: exit %d, stdout %q, stderr %q; want exit 2, a reason, no line", args, code, out, errOut)
		}
	}
}
