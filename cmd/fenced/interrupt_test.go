package main_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/bench"
	"github.com/fenced-dev/fenced/internal/proctest"
)

// interrupt sends SIGINT to the command and returns its exit code and how
// long it took to exit.
func interrupt(t *testing.T, f *fencedCmd) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	if err := f.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	code := f.wait(t, time.Minute)
	return code, time.Since(start)
}

// A benchmark whose server went away still ends at once on Ctrl-C and
// prints what it measured, marked partial (it used to ignore SIGINT for
// more than 30s while closing sessions nobody answered).
func TestInterrupt_BenchWithServerGone(t *testing.T) {
	srv := proctest.StartServer(t)
	b := startFenced(t, nil, "bench", "--endpoints", srv.Addr, "--workload", "sessions", "--sessions", "200",
		"--clients", "8", "--duration", "1m", "--warmup", "0s", "--json")
	eventually(t, "the bench's holders are open", 30*time.Second, func() bool {
		out, _, _ := runFenced(t, "status", "--endpoints", srv.Addr)
		return strings.Contains(out, "sessions (200)")
	})
	srv.Kill()
	code, took := interrupt(t, b)
	if code != 130 {
		t.Fatalf("exit %d, want 130 (interrupted)\nstderr: %s", code, b.stderr.String())
	}
	if took > 5*time.Second {
		t.Errorf("took %v to exit after SIGINT", took)
	}
	var r bench.Result
	if err := json.Unmarshal([]byte(b.stdout.String()), &r); err != nil || !r.Partial || r.Cycles != 200 {
		t.Fatalf("stdout %q: want the partial result of 200 holders (err %v)", b.stdout.String(), err)
	}
	if !strings.Contains(b.stderr.String(), "interrupted") || strings.Contains(b.stderr.String(), "context canceled") {
		t.Errorf("stderr %q: want \"interrupted\", not the cancellation", b.stderr.String())
	}
}

// An acquire waiting in the queue ends at once on Ctrl-C with exit 130,
// and leaves no waiter behind: the lock goes to the next acquire as soon
// as its holder's grant ends.
func TestInterrupt_WaitingAcquire(t *testing.T) {
	srv := proctest.StartServer(t)
	if _, errOut, code := runFenced(t, "acquire", "q", "--ttl", "2s", "--endpoints", srv.Addr); code != 0 {
		t.Fatalf("first acquire: exit %d %s", code, errOut)
	}
	w := startFenced(t, nil, "acquire", "q", "--wait", "1m", "--endpoints", srv.Addr)
	eventually(t, "the second acquire waits", 20*time.Second, func() bool {
		out, _, _ := runFenced(t, "status", "q", "--endpoints", srv.Addr)
		return strings.Contains(out, "waiters") || strings.Contains(out, "waits [q]")
	})
	code, took := interrupt(t, w)
	if code != 130 || took > 5*time.Second {
		t.Fatalf("exit %d after %v, want 130 within 5s; stderr %q", code, took, w.stderr.String())
	}
	if strings.Contains(w.stderr.String(), "\r") {
		t.Errorf("stderr %q: a progress line off a terminal", w.stderr.String())
	}
	out, errOut, code := runFenced(t, "acquire", "q", "--ttl", "2s", "--wait", "20s", "--endpoints", srv.Addr)
	if code != 0 || !strings.Contains(out, "token 2") {
		t.Fatalf("the next acquire: exit %d %q %q; want token 2 (the interrupted waiter never got one)", code, out, errOut)
	}
}

// A waiting acquire whose server went away ends within about a second of
// SIGTERM all the same (it used to retry closing its session forever),
// and one that is not interrupted ends soon after its --wait.
func TestInterrupt_WaitingAcquireServerGone(t *testing.T) {
	bothWaiting := regexp.MustCompile(`waiting: \d+, \d+`)
	srv := proctest.StartServer(t)
	if _, errOut, code := runFenced(t, "acquire", "q", "--ttl", "1m", "--endpoints", srv.Addr); code != 0 {
		t.Fatalf("first acquire: exit %d %s", code, errOut)
	}
	w := startFenced(t, nil, "acquire", "q", "--wait", "1m", "--endpoints", srv.Addr)
	// Long enough a wait that both are seen waiting on a loaded machine.
	w2 := startFenced(t, nil, "acquire", "q", "--wait", "10s", "--endpoints", srv.Addr)
	var last string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the last status: %s", last)
		}
	})
	eventually(t, "both acquires wait", 20*time.Second, func() bool {
		out, errOut, _ := runFenced(t, "status", "q", "--endpoints", srv.Addr)
		last = out + errOut
		// "waiting: 2, 3": the waiters' session ids (not a count).
		return bothWaiting.MatchString(out)
	})
	srv.Kill()
	start := time.Now()
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := w.wait(t, time.Minute); code != 130 {
		t.Fatalf("exit %d, want 130; stderr %q", code, w.stderr.String())
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %v to exit after SIGTERM", took)
	}
	if code := w2.wait(t, time.Minute); code != 3 {
		t.Fatalf("the uninterrupted acquire: exit %d, want 3 (not granted); stderr %q", code, w2.stderr.String())
	}
}
