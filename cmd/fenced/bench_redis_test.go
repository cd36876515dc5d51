package main_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fenced-dev/fenced/bench"
	"github.com/fenced-dev/fenced/internal/testdb"
)

// `fenced bench --backend redis://...` runs the lock and handoff workloads
// through the Redis grantor of a real redis-server; a Redis it cannot use
// is refused before anything runs.
func TestBench_RedisBackend(t *testing.T) {
	r, err := testdb.StartRedis()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	url := "redis://" + r.Addr + "/0"
	for _, w := range []bench.Workload{bench.WorkloadLock, bench.WorkloadHandoff} {
		t.Run(string(w), func(t *testing.T) {
			args := []string{"bench", "--backend", url, "--workload", string(w), "--clients", "4", "--duration", "1s", "--warmup", "200ms", "--json"}
			out, errOut, code := runFenced(t, args...)
			if code != 0 {
				t.Fatalf("fenced %v: exit %d\nstdout: %s\nstderr: %s", args, code, out, errOut)
			}
			var res bench.Result
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatalf("output is not one JSON result: %v\n%s", err, out)
			}
			if res.System != "redis" || res.Workload != w || res.Cycles <= 0 || res.Errors != 0 || res.TokenOrderViolations != 0 {
				t.Fatalf("result %+v: want redis, this workload, cycles > 0, no errors, no token order violations", res)
			}
		})
	}
	evicting, err := testdb.StartRedisArgs("--save", "", "--appendonly", "no", "--maxmemory-policy", "allkeys-lru")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(evicting.Stop)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--backend", url, "--workload", "sessions"}, "needs the fenced server"},
		{[]string{"--backend", "redis://" + evicting.Addr}, "maxmemory-policy is allkeys-lru"},
		{[]string{"--backend", "redis://127.0.0.1:1"}, "127.0.0.1:1"},
	} {
		_, errOut, code := runFenced(t, append([]string{"bench", "--duration", "300ms"}, tc.args...)...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("fenced bench %v: exit %d, stderr %q; want an error mentioning %q", tc.args, code, errOut, tc.want)
		}
	}
}
