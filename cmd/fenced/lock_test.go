package main_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/internal/faultproxy"
	"github.com/fenced-dev/fenced/internal/proctest"
)

// The stale writer, end to end with real processes: a `fenced lock` holder
// and its writing CMD are SIGSTOPped past the TTL; a second process
// acquires (a higher token) and writes; the first is SIGCONTed and its
// write with the old token is rejected by the resource's guard, with the
// required token reported.
func TestStaleWriter_PausedHolderRejected(t *testing.T) {
	srv := proctest.StartServer(t)
	res := &resource{}
	web := httptest.NewServer(res)
	defer web.Close()

	holder := startFenced(t, []string{"FENCED_TEST_WRITER=" + web.URL}, "lock", "stale", "--ttl", "1s", "--endpoints", srv.Addr, "--", os.Args[0])
	eventually(t, "the holder's first accepted write", 20*time.Second, func() bool {
		for _, a := range res.snapshot() {
			if a.accepted {
				return true
			}
		}
		return false
	})
	first := res.snapshot()[0]
	signalGroup(t, holder.cmd.Process.Pid, syscall.SIGSTOP)
	signalGroup(t, first.pid, syscall.SIGSTOP)

	out, errOut, code := runFenced(t, "acquire", "stale", "--ttl", "30s", "--wait", "20s", "--json", "--endpoints", srv.Addr)
	if code != 0 {
		t.Fatalf("second acquire: exit %d: %s", code, errOut)
	}
	var g struct{ Token string }
	if err := json.Unmarshal([]byte(out), &g); err != nil {
		t.Fatalf("acquire --json output %q: %v", out, err)
	}
	second, err := fence.ParseToken(g.Token)
	if err != nil || second <= first.token {
		t.Fatalf("second grant token %q, want above the paused holder's %d", g.Token, first.token)
	}
	req, _ := http.NewRequest(http.MethodPut, web.URL, nil)
	req.Header.Set("X-Fencing-Token", second.String())
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("write by the new holder: %v %v", resp, err)
	}
	resp.Body.Close()
	newWrite := len(res.snapshot()) - 1

	signalGroup(t, first.pid, syscall.SIGCONT)
	signalGroup(t, holder.cmd.Process.Pid, syscall.SIGCONT)
	if code := holder.wait(t, 30*time.Second); code != 4 {
		t.Fatalf("paused holder exit code %d, want 4 (lock lost)\nstderr: %s", code, holder.stderr.String())
	}
	if msg := holder.stderr.String(); !strings.Contains(msg, `lock "stale" lost (token `+first.token.String()+")") {
		t.Errorf("holder's stderr does not say which lock and token were lost: %q", msg)
	}

	after := res.snapshot()[newWrite+1:]
	var rejected int
	for _, a := range after {
		if a.token != first.token {
			continue
		}
		if a.accepted {
			t.Fatalf("the paused holder's write with token %d was accepted after token %d:\n%s", a.token, second, fmtAttempts(res.snapshot()))
		}
		if a.required != second {
			t.Fatalf("stale write rejected with required token %d, want %d", a.required, second)
		}
		rejected++
	}
	if rejected == 0 {
		t.Fatalf("the resumed holder made no write; cannot show it was rejected:\n%s", fmtAttempts(res.snapshot()))
	}
	t.Logf("paused holder token %d; new holder token %d; %d stale writes rejected", first.token, second, rejected)
}

// fenced lock passes the grant to CMD and exits with CMD's status.
func TestLock_PassesGrantAndExitStatus(t *testing.T) {
	srv := proctest.StartServer(t)
	out, errOut, code := runFenced(t, "lock", "job", "--endpoints", srv.Addr, "--", "sh", "-c", `echo "$FENCED_LOCK $FENCED_TOKEN $FENCED_ISSUER $FENCED_SESSION $FENCED_SESSION_SECRET"; exit 7`)
	if code != 7 {
		t.Fatalf("exit code %d, want CMD's 7; stderr %s", code, errOut)
	}
	fields := strings.Fields(out)
	if len(fields) != 5 || fields[0] != "job" || fields[2] == "" || fields[3] == "" || len(fields[4]) != 32 {
		t.Fatalf("CMD saw %q, want FENCED_LOCK, FENCED_TOKEN, FENCED_ISSUER, FENCED_SESSION and FENCED_SESSION_SECRET", out)
	}
	if _, err := fence.ParseToken(fields[1]); err != nil {
		t.Fatalf("FENCED_TOKEN=%q: %v", fields[1], err)
	}
	// Released when CMD exited: the lock is free at once.
	if _, errOut, code := runFenced(t, "acquire", "job", "--endpoints", srv.Addr); code != 0 {
		t.Fatalf("acquire after fenced lock exited: exit %d %s", code, errOut)
	}
}

// When the holder's keep-alives cannot reach the server, fenced lock
// considers the lock lost before the server can have expired it, stops CMD
// (SIGTERM to its process group) and exits 4.
func TestLock_KillsCommandWhenLockLost(t *testing.T) {
	srv := proctest.StartServer(t)
	proxy, err := faultproxy.New(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	dir := t.TempDir()
	started, marker := dir+"/started", dir+"/terminated"
	holder := startFenced(t, nil, "lock", "cut", "--ttl", "3s", "--grace", "10s", "--endpoints", proxy.Addr(), "--",
		"sh", "-c", `trap 'touch `+marker+`; exit 0' TERM; touch `+started+`; while true; do sleep 0.05; done`)
	// Cut only once CMD runs, that is once the client has the grant: the
	// server's status shows the lock as soon as it is applied, before the
	// answer reaches the client, and a cut in that window leaves the
	// client waiting for an acquire it never learns of (no CMD to stop).
	eventually(t, "CMD started under the lock", 20*time.Second, func() bool {
		_, err := os.Stat(started)
		return err == nil
	})
	proxy.SetMode(faultproxy.Blackhole)
	cut := time.Now()

	// Poll until CMD got SIGTERM; at that moment the server must still hold
	// the session's lock: the client gave up first.
	eventually(t, "CMD terminated", 20*time.Second, func() bool {
		_, err := os.Stat(marker)
		return err == nil
	})
	out, _, _ := runFenced(t, "status", "cut", "--json", "--endpoints", srv.Addr)
	if !strings.Contains(out, `"token"`) {
		t.Errorf("the server had already released the lock when CMD was stopped: the client must give up first\n%s", out)
	}
	t.Logf("CMD terminated %v after the cut", time.Since(cut).Round(time.Millisecond))
	if code := holder.wait(t, 20*time.Second); code != 4 {
		t.Fatalf("exit code %d, want 4\nstderr: %s", code, holder.stderr.String())
	}
	t.Logf("fenced lock exited %v after the cut", time.Since(cut).Round(time.Millisecond))
	if msg := holder.stderr.String(); !strings.Contains(msg, `lock "cut" lost (token `) {
		t.Fatalf("stderr %q does not say which lock was lost", msg)
	}
}

func TestAcquireRelease_CLI(t *testing.T) {
	srv := proctest.StartServer(t)
	ep := "--endpoints=" + srv.Addr
	out, _, code := runFenced(t, "acquire", "r", "--ttl", "30s", "--json", ep)
	var g map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &g) != nil {
		t.Fatalf("acquire --json: exit %d, %q", code, out)
	}
	for _, key := range []string{"name", "token", "issuer", "session", "ttl_ms", "secret"} {
		if _, ok := g[key]; !ok {
			t.Errorf("acquire --json has no %q: %s", key, out)
		}
	}
	if _, ok := g["token"].(string); !ok {
		t.Errorf("token is %T, want a decimal string", g["token"])
	}
	session, secret := g["session"].(string), g["secret"].(string)

	if _, _, code := runFenced(t, "acquire", "r", "--wait", "300ms", ep); code != 3 {
		t.Errorf("acquire of a held lock: exit %d, want 3", code)
	}
	if _, _, code := runFenced(t, "acquire", "r", "--ttl", "5ms", ep); code != 2 {
		t.Errorf("acquire --ttl 5ms: exit %d, want 2", code)
	}
	if _, _, code := runFenced(t, "acquire", ep); code != 2 {
		t.Errorf("acquire without a name: exit %d, want 2", code)
	}
	// The session id alone, or with a wrong secret, releases nothing.
	for _, bad := range [][]string{{}, {"--secret", "00112233445566778899aabbccddeeff"}} {
		_, errOut, code := runFenced(t, append([]string{"release", "r", "--session", session, ep}, bad...)...)
		if code == 0 {
			t.Errorf("release %v: exit 0, want a refusal", bad)
		}
		if len(bad) > 0 && !strings.Contains(errOut, "secret") {
			t.Errorf("release %v: stderr %q does not say the secret is wrong", bad, errOut)
		}
	}
	// protojson may put spaces between keys and values.
	if out, _, _ := runFenced(t, "status", "r", "--json", ep); !strings.Contains(strings.Join(strings.Fields(out), ""), `"token":"`+g["token"].(string)+`"`) {
		t.Fatalf("after refused releases the lock is not held with token %s: %s", g["token"], out)
	}
	for _, want := range []string{"released", "already_released"} {
		out, _, code := runFenced(t, "release", "r", "--session", session, "--secret", secret, ep)
		if code != 0 || strings.TrimSpace(out) != want {
			t.Errorf("release: exit %d %q, want %q", code, out, want)
		}
	}
	runFenced(t, "acquire", "r", ep)
	out, _, code = runFenced(t, "release", "r", "--session", session, "--secret", secret, "--json", ep)
	if code != 1 || strings.TrimSpace(out) != `{"result":"not_owned"}` {
		t.Errorf("release of another's lock: exit %d %q, want 1 and not_owned", code, out)
	}
}

// fenced kv put/get/del from the command line, with the token from
// FENCED_TOKEN as fenced lock sets it. The lock "orders" guards the key
// "orders" (the kv scope rule); another lock's token is refused with exit 7.
func TestKV_CLI(t *testing.T) {
	srv := proctest.StartServer(t)
	ep := "--endpoints=" + srv.Addr
	out, errOut, code := runFenced(t, "lock", "orders", ep, "--", "sh", "-c",
		`printf hello | "$0" kv put orders --endpoints "$1" && "$0" kv get orders --endpoints "$1" && echo && echo "$FENCED_TOKEN"`,
		proctest.Binary(t), srv.Addr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || lines[1] != "hello" {
		t.Fatalf("kv put/get under fenced lock: exit %d, %q, %s", code, out, errOut)
	}
	first := lines[2]
	// A newer holder (a one-shot grant that stays in force) writes; the
	// first holder's token is now stale: exit 5.
	grant := func(name string) string {
		t.Helper()
		out, errOut, code := runFenced(t, "acquire", name, "--ttl", "5m", "--json", ep)
		var g struct{ Token, Kind, Scope string }
		if err := json.Unmarshal([]byte(out), &g); code != 0 || err != nil || g.Kind != "lock" || g.Scope != name {
			t.Fatalf("acquire %s: exit %d %q %s", name, code, out, errOut)
		}
		return g.Token
	}
	token := grant("orders")
	if _, errOut, code := runFenced(t, "kv", "put", "orders", "newer", "--token", token, ep); code != 0 {
		t.Fatalf("second holder's put: exit %d %s", code, errOut)
	}
	_, errOut, code = runFenced(t, "kv", "put", "orders", "late", "--token", first, ep)
	if code != 5 || !strings.Contains(errOut, "stale token "+first) {
		t.Fatalf("stale put: exit %d %q, want 5", code, errOut)
	}
	other := grant("billing")
	_, errOut, code = runFenced(t, "kv", "put", "orders", "cross", "--token", other, ep)
	if code != 7 || !strings.Contains(errOut, `belongs to lock "billing"`) {
		t.Fatalf("put with another lock's token: exit %d %q, want 7 naming billing", code, errOut)
	}
	out, _, code = runFenced(t, "kv", "get", "orders", "--json", ep)
	if code != 0 || !strings.Contains(out, `"token":"`+token+`"`) || !strings.Contains(out, `"value":"newer"`) {
		t.Fatalf("kv get --json: exit %d %q", code, out)
	}
	if _, _, code := runFenced(t, "kv", "put", "orders", "x", "--token", token, "--if-version", "9", ep); code != 6 {
		t.Fatalf("put with a wrong --if-version: exit %d, want 6", code)
	}
	if _, _, code := runFenced(t, "kv", "put", "orders", "x", ep); code != 2 {
		t.Fatalf("put without a token: exit %d, want 2", code)
	}
	if out, _, code := runFenced(t, "kv", "del", "orders", "--token", token, ep); code != 0 || !strings.Contains(out, "deleted=true") {
		t.Fatalf("del: exit %d %q", code, out)
	}
	if _, _, code := runFenced(t, "kv", "get", "orders", ep); code != 3 {
		t.Fatalf("get after del: exit %d, want 3", code)
	}
}

// fenced revoke is refused by a server without --allow-revoke. With it, the
// holder (a fenced lock) learns at once that its lock is lost, and the
// next grant has a higher token.
func TestRevoke_CLI(t *testing.T) {
	off := proctest.StartServer(t)
	if _, errOut, code := runFenced(t, "acquire", "x", "--endpoints", off.Addr); code != 0 {
		t.Fatalf("acquire: exit %d %s", code, errOut)
	}
	if _, errOut, code := runFenced(t, "revoke", "x", "--reason", "test", "--endpoints", off.Addr); code != 1 || !strings.Contains(errOut, "--allow-revoke") {
		t.Fatalf("revoke on a server without --allow-revoke: exit %d %q, want 1 and how to enable it", code, errOut)
	}

	srv := proctest.StartServer(t, "--allow-revoke")
	ep := "--endpoints=" + srv.Addr
	if _, _, code := runFenced(t, "revoke", "free", "--reason", "test", ep); code != 3 {
		t.Errorf("revoke of a free lock: exit %d, want 3", code)
	}
	if _, _, code := runFenced(t, "revoke", "free", ep); code != 2 {
		t.Errorf("revoke without a reason: exit %d, want 2", code)
	}
	holder := startFenced(t, nil, "lock", "rv", "--ttl", "30s", "--grace", "1s", ep, "--", "sh", "-c", `echo "$FENCED_TOKEN"; sleep 60`)
	var first fence.Token
	eventually(t, "the lock is held", 20*time.Second, func() bool {
		tok, err := fence.ParseToken(strings.TrimSpace(holder.stdout.String()))
		first = tok
		return err == nil
	})
	out, errOut, code := runFenced(t, "revoke", "rv", "--reason", "stuck", "--json", ep)
	var g map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &g) != nil || g["token"] != first.String() {
		t.Fatalf("revoke: exit %d %q %s, want the grant with token %d", code, out, errOut, first)
	}
	revoked := time.Now()
	// The holder's session has a 30s TTL: only the push makes it stop this soon.
	if code := holder.wait(t, 3*time.Second); code != 4 {
		t.Fatalf("holder exit %d, want 4 (lock lost)\nstderr: %s", code, holder.stderr.String())
	}
	t.Logf("the holder stopped %v after the revoke", time.Since(revoked).Round(time.Millisecond))
	if msg := holder.stderr.String(); !strings.Contains(msg, "revoked") {
		t.Errorf("holder's stderr %q does not say the lock was revoked", msg)
	}
	out, _, code = runFenced(t, "acquire", "rv", "--json", ep)
	if code != 0 || json.Unmarshal([]byte(out), &g) != nil {
		t.Fatalf("acquire after the revoke: exit %d %q", code, out)
	}
	if next, err := fence.ParseToken(g["token"].(string)); err != nil || next <= first {
		t.Fatalf("next token %v, want above %d", g["token"], first)
	}
}

// fenced lock and fenced elect that are not granted within --wait exit 3
// with the object and the wait named, and run nothing; the session they
// opened (with a TTL of a minute) is closed at once: the server keeps only
// the holders'.
func TestLockAndElect_NotGrantedWithinWait(t *testing.T) {
	srv := proctest.StartServer(t)
	ep := "--endpoints=" + srv.Addr
	marker := t.TempDir() + "/ran"
	// The holders' commands let go of fenced's output (fenced's exit is
	// waited for through it) and end on their own.
	hold := []string{"--", "sh", "-c", "exec sleep 60 >/dev/null 2>&1 </dev/null"}
	startFenced(t, nil, append([]string{"lock", "busy", "--ttl", "30s", ep}, hold...)...)
	startFenced(t, nil, append([]string{"elect", "office", "--ttl", "30s", ep}, hold...)...)
	eventually(t, "the lock held and the election led", 20*time.Second, func() bool {
		l, _, _ := runFenced(t, "status", "busy", "--json", ep)
		e, _, code := runFenced(t, "observe", "office", "--count", "1", "--json", ep)
		return strings.Contains(l, `"token"`) && code == 0 && strings.Contains(e, `"leader":true`)
	})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"lock", "busy", "--wait", "300ms", "--ttl", "1m", ep, "--", "touch", marker}, "busy: not granted within 300ms"},
		{[]string{"elect", "office", "--wait", "300ms", "--ttl", "1m", ep, "--", "touch", marker}, "office: not elected within 300ms"},
	} {
		_, errOut, code := runFenced(t, c.args...)
		if code != 3 || !strings.Contains(errOut, c.want) {
			t.Errorf("fenced %s: exit %d %q, want 3 and %q", c.args[0], code, errOut, c.want)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("a command ran without its grant")
	}
	eventually(t, "only the holders' sessions left", 20*time.Second, func() bool {
		out, _, _ := runFenced(t, "status", ep)
		return strings.Contains(out, "\nsessions (2")
	})
}
