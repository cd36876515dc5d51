package main_test

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/fenced-dev/fenced/bench"
	"github.com/fenced-dev/fenced/internal/proctest"
)

// TestBench_Smoke runs every workload of `fenced bench` for a moment
// against a real server, so the command cannot rot. It asserts what the
// figures must satisfy on any machine, never how fast they are.
func TestBench_Smoke(t *testing.T) {
	srv := proctest.StartServer(t)
	for _, w := range bench.Workloads {
		t.Run(string(w), func(t *testing.T) {
			args := []string{"bench", "--endpoints", srv.Addr, "--workload", string(w), "--clients", "4",
				"--duration", "1s", "--warmup", "200ms", "--sessions", "50", "--json"}
			out, errOut, code := runFenced(t, args...)
			if code != 0 {
				t.Fatalf("fenced %v: exit %d\nstdout: %s\nstderr: %s", args, code, out, errOut)
			}
			var r bench.Result
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatalf("output is not one JSON result: %v\n%s", err, out)
			}
			if r.Workload != w || r.System != "fenced" || r.Cycles <= 0 || r.CyclesPerS <= 0 || r.Errors != 0 || r.TokenOrderViolations != 0 {
				t.Fatalf("result %+v: want this workload, cycles > 0, no errors, no token order violations", r)
			}
			if r.P50Ms <= 0 || r.P99Ms < r.P50Ms || r.MaxMs < r.P99Ms {
				t.Fatalf("latencies p50 %v p99 %v max %v are not ordered", r.P50Ms, r.P99Ms, r.MaxMs)
			}
			if w == bench.WorkloadSessions && r.Cycles != 50 {
				t.Fatalf("sessions workload opened %d holders, want 50", r.Cycles)
			}
			// The server runs here: the command finds it and samples it.
			if r.Server == nil || r.Server.RSSMiB <= 0 || len(r.Server.PIDs) != 1 {
				t.Fatalf("server usage %+v: want the local server's pid and RSS", r.Server)
			}
			// The clients ran in the bench process and used its CPU.
			if r.Client == nil || r.Client.CPUPercent <= 0 {
				t.Fatalf("client usage %+v: want this process's CPU during the measurement", r.Client)
			}
			// Every call of a cycle is a write of the client's and its
			// answer a write of the server's (Linux's /proc/PID/io counts
			// them); the sessions workload's holders make no calls while
			// it measures, as their TTL is long.
			if runtime.GOOS == "linux" && w != bench.WorkloadSessions && (r.Server.WriteCalls <= 0 || r.Server.ReadCalls <= 0 || r.Client.WriteCalls <= 0 || r.Client.ReadCalls <= 0) {
				t.Fatalf("system calls: server %d read %d write, client %d read %d write; want some of each",
					r.Server.ReadCalls, r.Server.WriteCalls, r.Client.ReadCalls, r.Client.WriteCalls)
			}
		})
	}

	t.Run("queue over independent connections", func(t *testing.T) {
		out, errOut, code := runFenced(t, "bench", "--endpoints", srv.Addr, "--workload", "queue", "--clients", "6", "--connections", "3",
			"--duration", "500ms", "--warmup", "0s")
		if code != 0 || !strings.Contains(out, "workers on one queue") || !strings.Contains(out, "claim ") || !strings.Contains(out, "0 claim token order violations") {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
		}
	})

	t.Run("text output", func(t *testing.T) {
		out, errOut, code := runFenced(t, "bench", "--endpoints", srv.Addr, "--clients", "2", "--duration", "300ms", "--warmup", "0s")
		if code != 0 || !strings.Contains(out, "cycles") || !strings.Contains(out, "p99") || !strings.Contains(out, "client     cpu") {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
		}
	})
}

func TestBench_BadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--workload", "nope"}, "unknown workload"},
		{[]string{"--clients", "0"}, "clients 0 out of range"},
		{[]string{"--duration", "0s"}, "duration 0s out of range"},
		{[]string{"--workload", "sessions", "--sessions", "0"}, "sessions 0 out of range"},
		{[]string{"--connections", "0"}, "connections 0 out of range"},
		{[]string{"--server-pid", "-3"}, "not a process id"},
		{[]string{"--workload", "limiter", "--batch", "-1"}, "batch -1 out of range"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			// No server listens on this address: bad input must be refused
			// before anything is sent.
			args := append([]string{"bench", "--endpoints", proctest.FreeAddr(t)}, tc.args...)
			_, errOut, code := runFenced(t, args...)
			if code != 2 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("fenced %v: exit %d, stderr %q; want exit %d mentioning %q", args, code, errOut, 2, tc.want)
			}
		})
	}
}
