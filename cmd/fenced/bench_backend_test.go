package main_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fenced-dev/fenced/bench"
	"github.com/fenced-dev/fenced/internal/testdb"
	"github.com/fenced-dev/fenced/pggrant"
)

// `fenced bench --backend postgres://...` runs the lock and handoff
// workloads through the PostgreSQL grantor of a real PostgreSQL; bad
// backends are refused before anything is written.
func TestBench_PostgresBackend(t *testing.T) {
	pg, err := testdb.StartPostgres()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pg.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	// Not migrated yet: the error names the migration, and nothing ran.
	_, errOut, code := runFenced(t, "bench", "--backend", pg.URL, "--duration", "300ms")
	if code == 0 || !strings.Contains(errOut, "run pggrant.Migrate") {
		t.Fatalf("bench on an unmigrated database: exit %d, stderr %q; want the migration named", code, errOut)
	}
	if err := pggrant.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	for _, w := range []bench.Workload{bench.WorkloadLock, bench.WorkloadHandoff} {
		t.Run(string(w), func(t *testing.T) {
			args := []string{"bench", "--backend", pg.URL, "--workload", string(w), "--clients", "4", "--duration", "1s", "--warmup", "200ms", "--json"}
			out, errOut, code := runFenced(t, args...)
			if code != 0 {
				t.Fatalf("fenced %v: exit %d\nstdout: %s\nstderr: %s", args, code, out, errOut)
			}
			var r bench.Result
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatalf("output is not one JSON result: %v\n%s", err, out)
			}
			if r.System != "postgres" || r.Workload != w || r.Cycles <= 0 || r.Errors != 0 || r.TokenOrderViolations != 0 {
				t.Fatalf("result %+v: want postgres, this workload, cycles > 0, no errors, no token order violations", r)
			}
		})
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--backend", pg.URL, "--workload", "sessions"}, "needs the fenced server"},
		{[]string{"--backend", "mysql://x"}, `--backend "mysql://x": want fenced`},
		{[]string{"--backend", "postgres://postgres@127.0.0.1:1/postgres?connect_timeout=2"}, "pggrant: connect to 127.0.0.1:1"},
	} {
		_, errOut, code := runFenced(t, append([]string{"bench", "--duration", "300ms"}, tc.args...)...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("fenced bench %v: exit %d, stderr %q; want an error mentioning %q", tc.args, code, errOut, tc.want)
		}
	}
}
