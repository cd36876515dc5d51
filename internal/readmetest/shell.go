package readmetest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// shell is one bash process that runs a section's commands one at a time,
// keeping variables, functions and background jobs between them, as a
// reader's terminal does.
type shell struct {
	cmd     *exec.Cmd
	stdin   *os.File
	scripts string // where each command is written before it is sourced

	mu   sync.Mutex
	out  bytes.Buffer // everything the shell and its children printed
	cond *sync.Cond
	done bool // the shell exited
	n    int
}

// startShell starts bash in dir with env.
func startShell(dir string, env []string, scripts string) (*shell, error) {
	s := &shell{scripts: scripts}
	s.cond = sync.NewCond(&s.mu)
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	s.cmd = exec.Command("bash", "--noprofile", "--norc")
	s.cmd.Dir = dir
	s.cmd.Env = env
	s.cmd.Stdin = r
	s.cmd.Stdout = outW // one stream for stdout and stderr, in the order written
	s.cmd.Stderr = outW
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	r.Close()
	outW.Close()
	s.stdin = w
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := outR.Read(buf)
			s.mu.Lock()
			s.out.Write(buf[:n])
			if err != nil {
				s.done = true
			}
			s.cond.Broadcast()
			s.mu.Unlock()
			if err != nil {
				outR.Close()
				return
			}
		}
	}()
	return s, nil
}

// result is what one command printed and its exit status.
type result struct {
	out     string
	status  int
	timeout bool
}

var doneRE = regexp.MustCompile(`\n__readmetest_done_(\d+)__ (\d+)\n`)

// run runs one command and waits up to timeout for it to finish. Its
// stdin is /dev/null.
func (s *shell) run(command string, timeout time.Duration) (result, error) {
	s.n++
	script := filepath.Join(s.scripts, fmt.Sprintf("step-%d.sh", s.n))
	if err := os.WriteFile(script, []byte(command+"\n"), 0o644); err != nil {
		return result{}, err
	}
	s.mu.Lock()
	s.out.Reset()
	s.mu.Unlock()
	// The marker follows a newline of its own, so output that does not end
	// in one is told apart from output that does.
	line := fmt.Sprintf(". %s </dev/null; printf '\\n__readmetest_done_%d__ %%d\\n' $?\n", strconv.Quote(script), s.n)
	if _, err := s.stdin.WriteString(line); err != nil {
		return result{}, fmt.Errorf("the shell has exited: %v", err)
	}
	deadline := time.Now().Add(timeout)
	timer := time.AfterFunc(timeout, func() {
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	defer timer.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		b := s.out.Bytes()
		if m := doneRE.FindSubmatchIndex(b); m != nil && string(b[m[2]:m[3]]) == strconv.Itoa(s.n) {
			status, _ := strconv.Atoi(string(b[m[4]:m[5]]))
			return result{out: string(b[:m[0]]), status: status}, nil
		}
		if s.done {
			return result{out: s.out.String(), status: -1}, fmt.Errorf("the shell exited")
		}
		if !time.Now().Before(deadline) {
			return result{out: s.out.String(), timeout: true}, nil
		}
		s.cond.Wait()
	}
}

// close ends the shell and everything it started: SIGTERM to its process
// group (so `fenced lock` stops its command), SIGKILL after a grace.
func (s *shell) close() {
	s.stdin.Close()
	pgid := s.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	exited := make(chan struct{})
	go func() { s.cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-exited
}
