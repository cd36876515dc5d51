package launch

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Spec says how to start a child process.
type Spec struct {
	// Bin is the program to run and Args its arguments.
	Bin  string
	Args []string
	// Env is added to this process's environment.
	Env []string
	// Out receives the process's stdout and stderr; nil discards them.
	Out io.Writer
	// OwnGroup puts the process in a process group of its own, so that a
	// signal to the caller's group (Ctrl-C in a terminal) does not reach
	// it: the caller decides when it stops.
	OwnGroup bool
	// Credential, if set, runs the process as that user and group (the
	// caller must be allowed to switch to them: root). Tests use it to run
	// a server that file permissions apply to.
	Credential *syscall.Credential
	// OnExit, if set, runs once the process has exited, before Done is
	// closed (for example to close the file Out writes to).
	OnExit func()
}

// Process is a running child process that can be signalled (SIGSTOP,
// SIGCONT, SIGTERM), killed and waited for.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts the process s describes.
func Start(s Spec) (*Process, error) {
	cmd := exec.Command(s.Bin, s.Args...)
	cmd.Env = append(os.Environ(), s.Env...)
	cmd.Stdout, cmd.Stderr = s.Out, s.Out
	if s.OwnGroup || s.Credential != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: s.OwnGroup, Credential: s.Credential}
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", s.Bin, err)
	}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		if s.OnExit != nil {
			s.OnExit()
		}
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the process.
func (p *Process) Signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill sends SIGKILL (after SIGCONT: a stopped process must run to die)
// and waits up to d for the process to exit; it reports whether it did.
func (p *Process) Kill(d time.Duration) bool {
	p.cmd.Process.Signal(syscall.SIGCONT)
	p.cmd.Process.Kill()
	return p.Wait(d)
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits up to d for the process to exit and reports whether it did.
func (p *Process) Wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// ExitCode is the exit code of an exited process: -1 if a signal killed
// it or it is still running.
func (p *Process) ExitCode() int {
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	default:
		return -1
	}
}
