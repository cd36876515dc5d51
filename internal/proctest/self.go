package proctest

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// Self is the test binary run again as a child process, to play a part
// of its own (a lock holder a test can SIGSTOP): the test's TestMain sees
// env and runs that part instead of the tests. It talks over lines on
// stdin and stdout.
type Self struct {
	Cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
	t   testing.TB
}

// StartSelf runs os.Args[0] with no tests selected and env added to the
// environment; its stderr is the test's. The process is continued (if
// stopped) and killed when the test ends.
func StartSelf(t testing.TB, env ...string) *Self {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		in.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	return &Self{Cmd: cmd, in: in, out: bufio.NewScanner(out), t: t}
}

// Send writes line and a newline to the process's stdin.
func (s *Self) Send(line string) {
	s.t.Helper()
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		s.t.Fatalf("write to the child process: %v", err)
	}
}

// Line reads the next line the process printed, failing the test when it
// exited instead.
func (s *Self) Line() string {
	s.t.Helper()
	if !s.out.Scan() {
		s.t.Fatalf("the child process exited: %v", s.out.Err())
	}
	return s.out.Text()
}

// Signal sends sig to the process.
func (s *Self) Signal(sig syscall.Signal) error { return s.Cmd.Process.Signal(sig) }
