package main_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fenced-dev/fenced/internal/proctest"
)

// The kv scope rule on a real 3-node cluster, every call through a
// follower (which forwards to the leader, whose --kv-scope mapping
// decides): another lock's token is refused with exit 7 naming its scope
// and changes nothing; a mapped key takes its mapped scope's token.
func TestCluster_KVScopeThroughFollower(t *testing.T) {
	servers := proctest.StartCluster(t, 3, "--kv-scope", "cache=billing")
	leader, followers := leaderOf(t, servers)
	via := "--endpoints=" + followers[0].Addr
	grant := func(name string) string {
		t.Helper()
		out, errOut, code := runFenced(t, "acquire", name, "--ttl", "5m", "--json", "--endpoints="+followers[1].Addr)
		var g struct{ Token, Kind, Scope string }
		if err := json.Unmarshal([]byte(out), &g); code != 0 || err != nil || g.Kind != "lock" || g.Scope != name {
			t.Fatalf("acquire %s: exit %d %q %s", name, code, out, errOut)
		}
		return g.Token
	}
	a, b, cache, billing := grant("a"), grant("b"), grant("cache"), grant("billing")

	for _, c := range []struct{ key, token, belongs string }{
		{"a", b, `belongs to lock "b", which does not cover scope "a"`},
		{"ab", a, `belongs to lock "a", which does not cover scope "ab"`},
		{"cache/x", cache, `belongs to lock "cache", which does not cover scope "billing"`},
	} {
		_, errOut, code := runFenced(t, "kv", "put", c.key, "forged", "--token", c.token, via)
		if code != 7 || !strings.Contains(errOut, c.belongs) {
			t.Fatalf("put %s with token %s: exit %d %q, want 7 and %q", c.key, c.token, code, errOut, c.belongs)
		}
		if _, _, code := runFenced(t, "kv", "get", c.key, "--endpoints="+leader.Addr); code != 3 {
			t.Fatalf("refused put of %s changed it: get exit %d, want 3 (not found)", c.key, code)
		}
	}
	for key, tok := range map[string]string{"a": a, "a/1": a, "cache/x": billing} {
		if _, errOut, code := runFenced(t, "kv", "put", key, "ok", "--token", tok, via); code != 0 {
			t.Fatalf("put %s with its scope's token: exit %d %s", key, code, errOut)
		}
	}
}
