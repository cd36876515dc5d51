package main_test

import (
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

// newToken runs `fenced auth token`, appends its line to authFile and
// returns the environment that makes the CLI send the token.
func newToken(t *testing.T, authFile, name string, roles ...string) []string {
	t.Helper()
	tokenFile := filepath.Join(filepath.Dir(authFile), name+".token")
	args := []string{"auth", "token", "--name", name, "--token-out", tokenFile}
	for _, r := range roles {
		args = append(args, "--role", r)
	}
	out, errOut, code := runFenced(t, args...)
	if code != 0 {
		t.Fatalf("auth token: exit %d %q %s", code, out, errOut)
	}
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, strings.TrimSpace(string(token))) {
		t.Fatalf("auth token printed the token: %q", out)
	}
	f, err := os.OpenFile(authFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(out); err != nil {
		t.Fatal(err)
	}
	return []string{"FENCED_TOKEN_FILE=" + tokenFile}
}

// A 3-node cluster with an auth file: members register (by their peer
// host, without TLS) and probe each other with the caller's token; a
// follower forwards the bearer token unchanged, and the leader checks the
// same identity: the app's call outside its prefix is denied through any
// member and changes nothing; admin-only calls are refused for the app.
func TestAuthCluster_ForwardingKeepsIdentity(t *testing.T) {
	dir := t.TempDir()
	authFile, auditFile := filepath.Join(dir, "auth.jsonl"), filepath.Join(dir, "audit.jsonl")
	admin := newToken(t, authFile, "admin", "=admin,read,acquire,kv-write")
	app := newToken(t, authFile, "app", "orders/=acquire,read")
	servers := proctest.StartCluster(t, 3, append([]string{"--auth-file", authFile, "--audit-log", auditFile}, stableLeader...)...)
	leader, followers := leaderOfEnv(t, admin, servers)
	via := followers[0].Addr

	if out, errOut, code := runFenced(t, "status", "--endpoints", via); code == 0 || !strings.Contains(errOut, "unauthenticated") {
		t.Fatalf("status without a token: exit %d %q %s", code, out, errOut)
	}
	before := statusVia(t, admin, leader.Addr)
	// The app takes orders/x (a 30s lease) through the follower.
	if out, errOut, code := runFencedEnv(t, app, "acquire", "orders/x", "--ttl", "30s", "--endpoints", via); code != 0 {
		t.Fatalf("app acquires orders/x through a follower: exit %d %q %s", code, out, errOut)
	}
	out, errOut, code := runFencedEnv(t, app, "acquire", "billing/x", "--ttl", "10s", "--endpoints", via)
	if code == 0 || !strings.Contains(errOut, "permission denied") || !strings.Contains(errOut, `"billing/x"`) {
		t.Fatalf("app acquires billing/x through a follower: exit %d %q %s", code, out, errOut)
	}
	if !testserver.AuditHas(t, auditFile, map[string]string{"event": "denied", "identity": "app", "target": "billing/x", "node": leader.NodeID}) {
		t.Fatalf("the leader's audit entry of the forwarded denial is missing")
	}
	for _, args := range [][]string{{"cluster", "remove", followers[1].NodeID}, {"cluster", "transfer-leader"}, {"revoke", "orders/x", "--reason", "test"}} {
		out, errOut, code := runFencedEnv(t, app, append(args, "--endpoints", via)...)
		if code == 0 || !strings.Contains(errOut, "permission denied") {
			t.Fatalf("app runs %v: exit %d %q %s", args, code, out, errOut)
		}
	}
	after := statusVia(t, admin, leader.Addr)
	// One grant (orders/x) was taken: the denied calls took none and moved
	// nothing.
	if after.Leader != before.Leader || after.Term != before.Term || after.LastToken != before.LastToken+1 || len(after.Members) != 3 {
		t.Fatalf("status before %+v, after %+v: the denied calls changed something", before, after)
	}
	if out, errOut, code := runFencedEnv(t, admin, "revoke", "orders/x", "--reason", "test", "--endpoints", via); code != 0 {
		t.Fatalf("admin revokes through a follower: exit %d %q %s", code, out, errOut)
	}
	if !testserver.AuditHas(t, auditFile, map[string]string{"event": "admin", "identity": "admin", "target": "orders/x", "outcome": "ok"}) {
		t.Fatalf("the admin's revoke is not in the audit log")
	}
}

// SIGHUP reloads the auth file: a token added to it works after the
// signal, not before.
func TestAuth_ReloadOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	authFile := filepath.Join(dir, "auth.jsonl")
	newToken(t, authFile, "admin", "=admin,read,acquire,kv-write")
	s := proctest.StartServer(t, "--auth-file", authFile)
	late := newToken(t, authFile, "late", "=read")
	if out, errOut, code := runFencedEnv(t, late, "status", "--endpoints", s.Addr); code == 0 || !strings.Contains(errOut, "unauthenticated") {
		t.Fatalf("status with a token added after the start, before SIGHUP: exit %d %q %s", code, out, errOut)
	}
	if err := s.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new token accepted", 10*time.Second, func() bool {
		_, _, code := runFencedEnv(t, late, "status", "--endpoints", s.Addr)
		return code == 0
	})
}

// With TLS on the API (and --ca), members register with the leader by
// their node certificates, and the CLI's token works over TLS.
func TestAuthCluster_TLSRegistersByNodeCertificate(t *testing.T) {
	dir := t.TempDir()
	authFile := filepath.Join(dir, "auth.jsonl")
	admin := newToken(t, authFile, "admin", "=admin,read,acquire,kv-write")
	servers, certs := proctest.StartClusterTLS(t, 3, "--auth-file", authFile)
	env := append(admin, "FENCED_CA="+filepath.Join(certs, tlsfiles.CACertFile))
	// leaderOfEnv waits until every member registered its API address.
	leader, _ := leaderOfEnv(t, env, servers)
	if out, errOut, code := runFencedEnv(t, env[1:], "status", "--endpoints", leader.Addr); code == 0 || !strings.Contains(errOut, "unauthenticated") {
		t.Fatalf("status over TLS without a token: exit %d %q %s", code, out, errOut)
	}
}
