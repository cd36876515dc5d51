package main_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/internal/proctest"
)

// Lock delay with real processes: the waiter is granted no sooner than the
// delay after the holder's grant expired, and not much later (bounded
// generously for a loaded machine); after a clean release there is no
// delay; fenced status shows it.
func TestLockDelay_CLI(t *testing.T) {
	srv := proctest.StartServer(t)
	ep := "--endpoints=" + srv.Addr
	const ttl, delay = 500 * time.Millisecond, 3 * time.Second

	start := time.Now()
	if _, errOut, code := runFenced(t, "acquire", "d", "--ttl", ttl.String(), "--lock-delay", delay.String(), ep); code != 0 {
		t.Fatalf("acquire --lock-delay: exit %d: %s", code, errOut)
	}
	eventually(t, "status shows the delay", 10*time.Second, func() bool {
		out, _, _ := runFenced(t, "status", "d", ep)
		return strings.Contains(out, "in its lock delay of 3s")
	})
	if _, _, code := runFenced(t, "acquire", "d", "--ttl", "30s", ep); code != 3 {
		t.Fatalf("try during the delay: exit %d, want 3 (not granted)", code)
	}
	out, errOut, code := runFenced(t, "acquire", "d", "--ttl", "30s", "--wait", "1m", ep)
	took := time.Since(start)
	if code != 0 {
		t.Fatalf("waiter: exit %d: %s", code, errOut)
	}
	if took < ttl+delay || took > ttl+delay+30*time.Second {
		t.Fatalf("waiter granted %v after the first acquire, want at least ttl+delay=%v and within 30s more (%s)", took, ttl+delay, out)
	}
	t.Logf("waiter granted %v after the first acquire (ttl %v + delay %v)", took, ttl, delay)

	// A release is clean: no delay, however long the one asked for.
	o, _, code := runFenced(t, "acquire", "clean", "--ttl", "30s", "--lock-delay", "1m", "--json", ep)
	var g map[string]any
	if code != 0 || json.Unmarshal([]byte(o), &g) != nil {
		t.Fatalf("acquire clean: exit %d %q", code, o)
	}
	if out, _, code := runFenced(t, "release", "clean", "--session", g["session"].(string), "--secret", g["secret"].(string), ep); code != 0 {
		t.Fatalf("release: exit %d %q", code, out)
	}
	if out, errOut, code := runFenced(t, "acquire", "clean", "--ttl", "30s", ep); code != 0 {
		t.Fatalf("acquire after a clean release: exit %d %q %q, want granted at once", code, out, errOut)
	}

	// Bad input: a clear usage error, nothing sent.
	state := func() string { // fenced status without its first line (the applied index moves)
		out, _, _ := runFenced(t, "status", ep)
		return out[strings.Index(out, "\n"):]
	}
	before := state()
	for _, bad := range []string{"61s", "-1s"} {
		if _, errOut, code := runFenced(t, "acquire", "bad", "--lock-delay", bad, ep); code != 2 || !strings.Contains(errOut, "lock delay") {
			t.Errorf("acquire --lock-delay %s: exit %d %q, want 2 and a lock delay error", bad, code, errOut)
		}
	}
	if after := state(); after != before {
		t.Errorf("refused acquires changed the state:\nbefore %s\nafter  %s", before, after)
	}
	if _, errOut, code := runFenced(t, "serve", "--lock-delay", "2m", "--data-dir", t.TempDir(), "--listen", proctest.FreeAddr(t), "--peer-listen", proctest.FreeAddr(t)); code == 0 || !strings.Contains(errOut, "lock delay 2m0s is out of range") {
		t.Errorf("serve --lock-delay 2m: exit %d %q, want a clear refusal", code, errOut)
	}
}

// The end of a delay is decided by the leader: when the leader is killed
// during a delay, the new leader arms it again in full from its takeover,
// so the waiter is still granted no sooner than the delay after the kill.
func TestLockDelay_LeaderKilled(t *testing.T) {
	servers := proctest.StartCluster(t, 3)
	leader, followers := leaderOf(t, servers)
	const delay = 4 * time.Second

	if _, errOut, code := runFenced(t, "acquire", "d", "--ttl", "500ms", "--lock-delay", delay.String(), "--endpoints="+leader.Addr); code != 0 {
		t.Fatalf("acquire: exit %d %s", code, errOut)
	}
	eventually(t, "the delay started", 20*time.Second, func() bool {
		out, _, _ := runFenced(t, "status", "d", "--endpoints="+leader.Addr)
		return strings.Contains(out, "in its lock delay")
	})
	leader.Kill()
	killed := time.Now()
	rest := "--endpoints=" + proctest.Endpoints(followers)
	out, errOut, code := runFenced(t, "acquire", "d", "--ttl", "30s", "--wait", "2m", "--timeout", "1m", rest)
	took := time.Since(killed)
	if code != 0 {
		t.Fatalf("waiter after the leader's kill: exit %d %q %q", code, out, errOut)
	}
	if took < delay || took > delay+45*time.Second {
		t.Fatalf("waiter granted %v after the leader was killed during a %v delay, want at least the delay (re-armed in full) and within 45s more", took, delay)
	}
	t.Logf("waiter granted %v after the leader's SIGKILL (delay %v): %s", took, delay, strings.TrimSpace(out))
}

// fenced renew keeps the grant's token and sets its TTL; renewing a grant
// one does not own prints not_owned and changes nothing; a wrong secret
// and bad input are refused.
func TestRenew_CLI(t *testing.T) {
	srv := proctest.StartServer(t)
	ep := "--endpoints=" + srv.Addr
	grant := func(name, ttl string) map[string]any {
		out, errOut, code := runFenced(t, "acquire", name, "--ttl", ttl, "--json", ep)
		var g map[string]any
		if code != 0 || json.Unmarshal([]byte(out), &g) != nil {
			t.Fatalf("acquire %s: exit %d %q %q", name, code, out, errOut)
		}
		return g
	}
	g, other := grant("r", "1s"), grant("o", "1m")
	// Renewing every 300ms keeps a 1s grant for 3s, under its token.
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(300 * time.Millisecond) {
		out, errOut, code := runFenced(t, "renew", "r", "--session", g["session"].(string), "--secret", g["secret"].(string), "--json", ep)
		var r map[string]any
		if code != 0 || json.Unmarshal([]byte(out), &r) != nil || r["token"] != g["token"] {
			t.Fatalf("renew: exit %d %q %q, want token %v", code, out, errOut, g["token"])
		}
	}
	out, _, code := runFenced(t, "renew", "r", "--session", g["session"].(string), "--secret", g["secret"].(string), "--ttl", "1m", ep)
	if code != 0 || !strings.Contains(out, "renewed token "+g["token"].(string)) || !strings.Contains(out, "ttl 1m0s") {
		t.Fatalf("renew --ttl 1m: exit %d %q", code, out)
	}
	before, _, _ := runFenced(t, "status", "--json", ep)
	strip := func(s string) string { // the applied index and term move with every entry
		var m map[string]any
		json.Unmarshal([]byte(s), &m)
		delete(m, "applied_index")
		b, _ := json.Marshal(m)
		return string(b)
	}
	out, _, code = runFenced(t, "renew", "r", "--session", other["session"].(string), "--secret", other["secret"].(string), "--ttl", "2h", ep)
	if code != 1 || strings.TrimSpace(out) != "not_owned" {
		t.Errorf("renew of another's grant: exit %d %q, want 1 and not_owned", code, out)
	}
	if _, errOut, code := runFenced(t, "renew", "r", "--session", g["session"].(string), "--secret", other["secret"].(string), ep); code != 1 || !strings.Contains(errOut, "secret") {
		t.Errorf("renew with a wrong secret: exit %d %q, want 1 and a secret error", code, errOut)
	}
	for _, bad := range [][]string{{"--ttl", "50ms"}, {"--ttl", "25h"}, {"--session", "0"}, {"--secret", ""}} {
		args := append([]string{"renew", "r", "--session", g["session"].(string), "--secret", g["secret"].(string), ep}, bad...)
		if _, errOut, code := runFenced(t, args...); code != 2 {
			t.Errorf("renew %v: exit %d %q, want 2", bad, code, errOut)
		}
	}
	if after, _, _ := runFenced(t, "status", "--json", ep); strip(after) != strip(before) {
		t.Errorf("refused renewals changed the state:\nbefore %s\nafter  %s", before, after)
	}
}
