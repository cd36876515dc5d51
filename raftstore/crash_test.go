//go:build unix

package raftstore_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/raftstore"
)

// childDirEnv tells the test binary to run as the child of
// TestNode_KillRestart: open the node in that dir and apply until killed.
const childDirEnv = "RAFTSTORE_TEST_CHILD_DIR"

// TestNode_KillRestart kills a process with SIGKILL while it applies
// commands, then reopens its data dir: every command the child saw
// acknowledged must be in the state, and the dir must not stay locked.
func TestNode_KillRestart(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillRestartChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), childDirEnv+"="+dir)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()

	// Read acknowledgements until enough arrived, then kill -9 mid-stream.
	var acked uint64
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	timeout := time.After(15 * time.Second)
	for acked < 200 {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("child exited after %d acknowledged commands", acked)
			}
			if v, found := strings.CutPrefix(line, "acked "); found {
				if acked, err = strconv.ParseUint(v, 10, 64); err != nil {
					t.Fatalf("child printed %q", line)
				}
			}
		case <-timeout:
			t.Fatalf("child acknowledged only %d commands in 15s", acked)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed = true
	_ = cmd.Wait()
	for line := range lines { // acknowledgements printed before the kill
		if v, found := strings.CutPrefix(line, "acked "); found {
			if a, err := strconv.ParseUint(v, 10, 64); err == nil && a > acked {
				acked = a
			}
		}
	}

	fsm := &counter{}
	n := open(t, testConfig(t, dir), fsm)
	waitLeader(t, n)
	barrier(t, n)
	got, _ := fsm.get()
	if got < acked {
		t.Fatalf("after kill -9 and restart counter = %d, want at least %d (acknowledged before the kill)", got, acked)
	}
	applyN(t, n, 1, got+1)
	t.Logf("child acknowledged %d commands before SIGKILL; restart recovered %d", acked, got)
}

// TestKillRestartChild is the child process of TestNode_KillRestart; it
// does nothing in a normal test run.
func TestKillRestartChild(t *testing.T) {
	dir := os.Getenv(childDirEnv)
	if dir == "" {
		t.Skip("child process of TestNode_KillRestart")
	}
	n, err := raftstore.Open(testConfig(t, dir), &counter{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	waitLeader(t, n)
	for {
		resp, err := n.Propose(context.Background(), "inc")
		if err != nil {
			t.Fatalf("Propose: %v", err)
		}
		fmt.Printf("acked %d\n", resp)
	}
}
