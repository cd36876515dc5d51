package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// process is one server process this program started, in a process group
// of its own so that stopping it also stops anything it forked.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
}

// startProcess starts bin with args in a new process group, its output
// going to dir/name.log. The process is killed (SIGKILL) if this program's
// thread that started it dies first.
func startProcess(dir, name, bin string, args ...string) (*process, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("%s: log file: %w", name, err)
	}
	defer logFile.Close()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: start %s: %w", name, bin, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	return p, nil
}

// pid returns the process id.
func (p *process) pid() int { return p.cmd.Process.Pid }

// running reports whether the process has not exited.
func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop asks the process group to end (SIGTERM), then kills it (SIGKILL)
// after grace, and waits (bounded) for the process to be gone.
func (p *process) stop(grace time.Duration) {
	if !p.running() {
		return
	}
	pgid := p.cmd.Process.Pid // Setpgid: the group id is the leader's pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		fmt.Fprintf(os.Stderr, "compare: %s (pid %d) still running 10s after SIGKILL\n", p.name, pgid)
	}
}

// logTail returns the last lines of the process's output, for errors.
func (p *process) logTail() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}

// waitFor polls ready every 50 ms until it returns nil, the process
// exits, or timeout passes.
func (p *process) waitFor(timeout time.Duration, ready func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := ready()
		if err == nil {
			return nil
		}
		if !p.running() {
			return fmt.Errorf("%s exited before it was ready; its log ends:\n%s", p.name, p.logTail())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %v (last: %v); its log ends:\n%s", p.name, timeout, err, p.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freeAddrs returns n distinct loopback addresses whose ports were free a
// moment ago (each held until all are picked).
func freeAddrs(n int) ([]string, error) {
	var addrs []string
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick a free loopback port: %w", err)
		}
		lns = append(lns, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs, nil
}

// errMissing reports a server binary that is not installed.
var errMissing = errors.New("not installed; run ./setup.sh (or: apt-get install -y etcd-server zookeeper default-jre-headless redis-server)")

// lookBin returns the path of an installed binary, or errMissing.
func lookBin(path string) (string, error) {
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s %w", path, errMissing)
	}
	return path, nil
}
