package main_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
	"github.com/fenced-dev/fenced/internal/bounded"
	"github.com/fenced-dev/fenced/internal/proctest"
)

// TestMain doubles as the stale writer: with FENCED_TEST_WRITER set to a
// guard's URL, the test binary is a CMD for `fenced lock` that writes with
// its FENCED_TOKEN every 20ms and never checks whether it still holds the
// lock — the naive holder that fencing must stop at the resource. On
// SIGTERM it makes one last write and exits.
func TestMain(m *testing.M) {
	if url := os.Getenv("FENCED_TEST_WRITER"); url != "" {
		staleWriter(url)
		return
	}
	os.Exit(proctest.Main(m))
}

func staleWriter(url string) {
	token := os.Getenv("FENCED_TOKEN")
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	write := func() {
		req, _ := http.NewRequest(http.MethodPut, url, nil)
		req.Header.Set("X-Fencing-Token", token)
		req.Header.Set("X-Writer-Pid", strconv.Itoa(os.Getpid()))
		if slot := os.Getenv("FENCED_SLOT"); slot != "" {
			// A semaphore permit fences its slot: the object name/slot.
			req.Header.Set("X-Object", os.Getenv("FENCED_SEMAPHORE")+"/"+slot)
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}
	for i := 0; i < 3000; i++ { // bounded: at most a minute
		select {
		case <-term:
			write()
			os.Exit(0)
		case <-time.After(20 * time.Millisecond):
			write()
		}
	}
	os.Exit(1)
}

// attempt is one write seen by the test resource.
type attempt struct {
	token    fence.Token
	accepted bool
	required fence.Token
	pid      int
	object   string
}

// resource is an HTTP resource protected by an in-memory guard, following
// the HTTP convention of docs/design.md §5: X-Fencing-Token in, 409 with
// X-Required-Token for a stale token.
type resource struct {
	guard    guard.Memory
	mu       sync.Mutex
	attempts []attempt
}

func (r *resource) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	tok, err := fence.ParseToken(req.Header.Get("X-Fencing-Token"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	pid, _ := strconv.Atoi(req.Header.Get("X-Writer-Pid"))
	object := req.Header.Get("X-Object")
	if object == "" {
		object = "object"
	}
	err = r.guard.Check(req.Context(), object, tok)
	a := attempt{token: tok, accepted: err == nil, pid: pid, object: object}
	if se, ok := err.(*fence.StaleTokenError); ok {
		a.required = se.Required
		w.Header().Set("X-Required-Token", se.Required.String())
		w.WriteHeader(http.StatusConflict)
	}
	r.mu.Lock()
	r.attempts = append(r.attempts, a)
	r.mu.Unlock()
}

func (r *resource) snapshot() []attempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]attempt(nil), r.attempts...)
}

// fencedCmd is a fenced client command run as a child process in its own
// process group.
type fencedCmd struct {
	cmd    *exec.Cmd
	stdout syncBuffer
	stderr syncBuffer
	done   chan struct{}
}

// syncBuffer is a bytes.Buffer safe to read while a process writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func startFenced(t *testing.T, env []string, args ...string) *fencedCmd {
	t.Helper()
	f := &fencedCmd{cmd: exec.Command(proctest.Binary(t), args...), done: make(chan struct{})}
	f.cmd.Env = append(os.Environ(), env...)
	f.cmd.Stdout, f.cmd.Stderr = &f.stdout, &f.stderr
	f.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := f.cmd.Start(); err != nil {
		t.Fatalf("start fenced %v: %v", args, err)
	}
	go func() { f.cmd.Wait(); close(f.done) }()
	t.Cleanup(func() {
		syscall.Kill(-f.cmd.Process.Pid, syscall.SIGCONT)
		syscall.Kill(-f.cmd.Process.Pid, syscall.SIGKILL)
		bounded.Recv(t, "killed fenced exits", time.Minute, f.done)
	})
	return f
}

// wait waits for the command to exit (bounded) and returns its exit code.
func (f *fencedCmd) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-f.done:
		return f.cmd.ProcessState.ExitCode()
	case <-time.After(d):
		t.Fatalf("fenced %v did not exit within %v\nstderr: %s", f.cmd.Args[1:], d, f.stderr.String())
		return -1
	}
}

// runFenced runs a fenced client command to completion.
func runFenced(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runFencedEnv(t, nil, args...)
}

func signalGroup(t *testing.T, pgid int, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(-pgid, sig); err != nil {
		t.Fatalf("kill -%v -%d: %v", sig, pgid, err)
	}
}

func eventually(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func fmtAttempts(as []attempt) string {
	var b bytes.Buffer
	for _, a := range as {
		fmt.Fprintf(&b, "  %s token %d accepted=%v required=%d pid=%d\n", a.object, a.token, a.accepted, a.required, a.pid)
	}
	return b.String()
}
