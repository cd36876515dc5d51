package bench_test

import (
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/bench"
)

// TestCPUTime_CountsDescendants runs a shell that forks a busy child and a
// sleeping grandchild (the shape of runuser → postmaster → backends) and
// checks that the root's CPU time includes what its descendants used,
// while the root itself only waits.
func TestCPUTime_CountsDescendants(t *testing.T) {
	// The child burns CPU for a while, then execs a sleep that stays
	// alive: its CPU is counted live, then after its exit in the root's
	// waited-for children.
	cmd := exec.Command("sh", "-c", `sh -c 'end=$(($(date +%s)+2)); while [ $(date +%s) -lt $end ]; do :; done; echo busy-done; exec sleep 30' & wait`)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	root := cmd.Process.Pid
	buf := make([]byte, 64)
	var got strings.Builder
	for !strings.Contains(got.String(), "busy-done") {
		n, err := out.Read(buf)
		if err != nil {
			t.Fatalf("the busy child did not finish: %v (read %q)", err, got.String())
		}
		got.Write(buf[:n])
	}
	tree := bench.ProcessTree([]int{root})
	if len(tree) < 2 || tree[0] != root {
		t.Fatalf("ProcessTree(%d) = %v: want the root and its child", root, tree)
	}
	if slices.Contains(tree[1:], root) {
		t.Fatalf("ProcessTree(%d) = %v lists the root twice", root, tree)
	}
	own := rootOwnCPU(t, root)
	all := bench.CPUTime([]int{root})
	// The child spun for 2s of wall time; on a loaded machine it gets less
	// of a core, but surely a tenth.
	if all < 200*time.Millisecond || all < own+150*time.Millisecond {
		t.Fatalf("CPUTime of the tree = %v, the root's own %v: want the busy child's CPU (≥ 200ms) counted", all, own)
	}
}

// rootOwnCPU reads the root's own utime+stime.
func rootOwnCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := exec.Command("cat", "/proc/"+strconv.Itoa(pid)+"/stat").Output()
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}
