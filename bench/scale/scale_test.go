package main

import (
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/internal/proctest"
)

// TestMeasure runs one small row against real processes: the snapshot is
// found in the log, the restarted server holds every holder again and both
// new members catch up; no holder is lost on the way.
func TestMeasure(t *testing.T) {
	cfg := config{bin: proctest.Binary(t), dir: t.TempDir(), ttl: 20 * time.Second, rest: 500 * time.Millisecond, clients: 8, connections: 1,
		members: 2, tail: 20, timeout: 2 * time.Minute, requestTimeout: 5 * time.Second, progress: t.Logf}
	r, err := measure(context.Background(), cfg, 50)
	if err != nil {
		t.Fatal(err)
	}
	if r.SnapshotIndex == 0 || r.SnapshotBytes <= 0 || r.SnapshotPersistMs <= 0 {
		t.Errorf("snapshot not measured: %+v", r)
	}
	if r.RestartReadyS <= 0 || r.RestartAllS < r.RestartReadyS || r.RestoreMs <= 0 {
		t.Errorf("restart not measured: ready %v s, all %v s, restore %v ms", r.RestartReadyS, r.RestartAllS, r.RestoreMs)
	}
	if len(r.CatchUpS) != 2 || r.CatchUpS[0] <= 0 || r.CatchUpS[1] <= 0 {
		t.Errorf("catch-up %v, want two positive times", r.CatchUpS)
	}
	if r.SessionsAtEnd != 50 {
		t.Errorf("%d sessions at the end, want the 50 holders", r.SessionsAtEnd)
	}
	if r.RSSMiB <= 0 || math.Abs(r.RenewalsPerS-7.5) > 0.01 {
		t.Errorf("rest figures: RSS %v MiB, %v renewals/s", r.RSSMiB, r.RenewalsPerS)
	}
	var b strings.Builder
	if err := writeTable(&b, []Row{r}); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(b.String()), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[2], "| 50 |") {
		t.Errorf("table:\n%s", b.String())
	}
}

func TestParseLog(t *testing.T) {
	log := `not json
{"time":"2026-12-01T21:53:59.5Z","level":"INFO","msg":"raft: state encoded for a snapshot","index":7,"bytes":100,"encode_ms":3}
{"time":"2026-12-01T21:53:59.6Z","level":"INFO","msg":"starting snapshot up to","logger":"raft","index":7}
{"time":"2026-12-01T21:53:59.7Z","level":"INFO","msg":"other","index":8}
`
	ls, err := parseLog(strings.NewReader(log), "raft: state encoded for a snapshot", "starting snapshot up to")
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 2 || ls[0].EncodeMs != 3 || ls[0].Bytes != 100 || ls[1].Index != 7 || ls[1].Time.Sub(ls[0].Time) != 100*time.Millisecond {
		t.Fatalf("parseLog = %+v", ls)
	}
}

func TestParseMetrics(t *testing.T) {
	text := "# HELP fenced_sessions Live sessions.\nfenced_sessions 1e+06\nfenced_sessions_other 3\nfenced_locks_held 12\n"
	m, err := parseMetrics(strings.NewReader(text), "fenced_sessions", "fenced_locks_held")
	if err != nil || m["fenced_sessions"] != 1e6 || m["fenced_locks_held"] != 12 {
		t.Fatalf("parseMetrics = %v, %v", m, err)
	}
	if _, err := parseMetrics(strings.NewReader(text), "fenced_waiters"); err == nil {
		t.Error("a metric not served was not an error")
	}
}

func TestParseSizes(t *testing.T) {
	if ns, err := parseSizes("1000, 1000000"); err != nil || len(ns) != 2 || ns[1] != 1000000 {
		t.Fatalf("parseSizes = %v, %v", ns, err)
	}
	for _, bad := range []string{"", "0", "1000001", "1k", "10,"} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("parseSizes(%q) accepted", bad)
		}
	}
}

func TestCount(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567"} {
		if got := count(n); got != want {
			t.Errorf("count(%d) = %q, want %q", n, got, want)
		}
	}
}

// The client's CPU at rest is this process's alone: a busy child (as the
// servers this program starts are its children) adds nothing to it.
func TestClientCPU_LeavesOutChildren(t *testing.T) {
	busy := exec.Command("sh", "-c", "while :; do :; done")
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { busy.Process.Kill(); busy.Wait() }()
	child0, self0 := cpuOf(busy.Process.Pid), clientCPU()
	// Until the child has used 300ms of CPU (however loaded the machine).
	for deadline := time.Now().Add(60 * time.Second); cpuOf(busy.Process.Pid)-child0 < 300*time.Millisecond; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the busy child got under 300ms of CPU in 60s")
		}
	}
	child, self := cpuOf(busy.Process.Pid)-child0, clientCPU()-self0
	if self >= child/2 {
		t.Fatalf("client CPU %v while the busy child used %v: the child is counted as the client's", self, child)
	}
}

// A row that fails keeps its logs, in the temporary directory too, and
// the error says where they are.
func TestRun_FailureKeepsTheLogs(t *testing.T) {
	var stdout, stderr strings.Builder
	err := run([]string{"--fenced", "/bin/false", "--sessions", "1", "--timeout", "2s", "--members", "0"}, &stdout, &stderr)
	if err == nil {
		t.Fatal("a server that never gets ready: no error")
	}
	_, dir, ok := strings.Cut(err.Error(), "logs are kept in ")
	dir = strings.TrimSuffix(dir, ")")
	if !ok || dir == "" {
		t.Fatalf("error %q names no directory", err)
	}
	defer os.RemoveAll(dir)
	if logs, _ := filepath.Glob(filepath.Join(dir, "scale-1-*", "*.log")); len(logs) == 0 {
		t.Fatalf("no log kept in %s (error %v)", dir, err)
	}
}

// The table shows the renewals the server counted beside the scheduled
// ones when the row has them.
func TestWriteTable_CountedRenewals(t *testing.T) {
	var b strings.Builder
	if err := writeTable(&b, []Row{{Sessions: 1000, RenewalsPerS: 25, RenewalsCountedPerS: 24.6}, {Sessions: 10, RenewalsPerS: 2}}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 || !strings.Contains(lines[2], "(25; counted 25)") || !strings.Contains(lines[3], "(2) |") {
		t.Errorf("table:\n%s", b.String())
	}
}
