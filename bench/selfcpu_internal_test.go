//go:build unix

package bench

import (
	"os/exec"
	"testing"
	"time"
)

// TestSelfCPU_ExcludesChildren runs a busy child process to its end and
// checks that the client CPU of this process leaves its time out: in
// bench/compare the servers are children of the process whose CPU is the
// clients', and a server stopped (waited for) during a measurement must
// not be counted as client CPU.
func TestSelfCPU_ExcludesChildren(t *testing.T) {
	before, ok := selfCPU()
	if !ok {
		t.Fatal("selfCPU: not readable on this platform")
	}
	cmd := exec.Command("sh", "-c", `end=$(($(date +%s)+2)); while [ $(date +%s) -lt $end ]; do :; done`)
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	after, _ := selfCPU()
	child := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	if child < 200*time.Millisecond {
		t.Skipf("the busy child got only %v of CPU on this loaded machine; nothing to tell apart", child)
	}
	if self := after - before; self >= child/2 {
		t.Fatalf("this process's CPU grew by %v while it only waited for a child that used %v: the child's time is counted", self, child)
	}
}

// TestClientUsage_CountsThisProcess burns CPU in this process and checks
// that the client usage over that time counts it.
func TestClientUsage_CountsThisProcess(t *testing.T) {
	s := startClientUsage()
	if s == nil {
		t.Fatal("startClientUsage: not readable on this platform")
	}
	start := time.Now()
	before, _ := selfCPU()
	x := uint64(1)
	for now, _ := selfCPU(); now-before < 100*time.Millisecond; now, _ = selfCPU() {
		for range 10000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	elapsed := time.Since(start)
	u := s.stop(elapsed)
	if u == nil {
		t.Fatal("stop returned nil")
	}
	// At least the 100 ms burnt, over the wall time it took.
	if want := 100 * float64(100*time.Millisecond) / float64(elapsed); u.CPUPercent < want {
		t.Fatalf("client CPU %.1f%% over %v: want at least %.1f%% (100 ms of CPU burnt; x=%d)", u.CPUPercent, elapsed, want, x)
	}
}
