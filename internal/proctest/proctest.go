// Package proctest runs real fenced processes for tests: it builds the
// fenced binary once per test binary and starts `fenced serve` as a child
// process that tests can SIGKILL, SIGSTOP and SIGCONT.
package proctest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/internal/testserver"
)

// build is one fenced binary built from this source tree, once per test
// binary, into a temporary directory.
type build struct {
	tags string
	once sync.Once
	path string
	err  error
	out  []byte
}

var (
	plainBuild = &build{}
	faultBuild = &build{tags: "fencedfaults"}
)

// Binary returns the path of a fenced binary built from this source tree:
// a production build, without the fault hooks.
func Binary(t testing.TB) string {
	t.Helper()
	return plainBuild.get(t)
}

// FaultBinary returns the path of a test build of fenced (build tag
// fencedfaults): the binary the fault harness needs, with the dial hook,
// the skewed clock and the negative controls.
func FaultBinary(t testing.TB) string {
	t.Helper()
	return faultBuild.get(t)
}

func (b *build) get(t testing.TB) string {
	t.Helper()
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "fenced-bin-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, "fenced")
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		cmd := exec.Command("go", "build", "-tags", b.tags, "-o", b.path, "./cmd/fenced")
		cmd.Dir = root
		b.out, b.err = cmd.CombinedOutput()
	})
	if b.err != nil {
		t.Fatalf("build fenced (tags %q): %v\n%s", b.tags, b.err, b.out)
	}
	return b.path
}

// FreeAddr returns a loopback address with a port that was free a moment
// ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pick a free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// FreeAddrs returns n distinct free loopback addresses, holding each until
// all are picked so none is handed out twice.
func FreeAddrs(t testing.TB, n int) []string {
	t.Helper()
	var addrs []string
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("pick a free port: %v", err)
		}
		defer ln.Close()
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs
}

// Server is a `fenced serve` child process.
type Server struct {
	NodeID   string
	Addr     string // API address
	PeerAddr string // Raft address
	DataDir  string
	Args     []string // extra flags
	Env      []string // extra environment
	Faults   bool     // run the test build (FaultBinary), for its fault hooks

	t      testing.TB
	mu     sync.Mutex
	cmd    *exec.Cmd
	waited chan struct{}
	log    bytes.Buffer
}

// StartServer starts `fenced serve` on free loopback ports with a fresh data
// dir (extra flags in args) and waits until it is ready. The process is
// killed when the test ends.
func StartServer(t testing.TB, args ...string) *Server {
	t.Helper()
	addrs := FreeAddrs(t, 2)
	s := &Server{Addr: addrs[0], PeerAddr: addrs[1], DataDir: t.TempDir(), Args: args, t: t}
	s.Start()
	t.Cleanup(func() { s.Kill() })
	return s
}

// Init prepares a Server built by hand (not by StartServer or
// StartCluster) for Start.
func (s *Server) Init(t testing.TB) { s.t = t }

// Start (re)starts the process with the same addresses and data dir and
// waits until it is ready to serve writes.
func (s *Server) Start() {
	s.t.Helper()
	s.StartNoWait()
	testserver.WaitReady(s.t, s.Addr)
}

// StartNoWait (re)starts the process without waiting for it to be ready.
func (s *Server) StartNoWait() {
	s.t.Helper()
	args := []string{"serve", "--listen", s.Addr, "--peer-listen", s.PeerAddr, "--data-dir", s.DataDir}
	if s.NodeID != "" {
		args = append(args, "--node-id", s.NodeID)
	}
	args = append(args, s.Args...)
	bin := Binary(s.t)
	if s.Faults {
		bin = FaultBinary(s.t)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), s.Env...)
	s.mu.Lock()
	cmd.Stdout, cmd.Stderr = &lockedWriter{&s.mu, &s.log}, &lockedWriter{&s.mu, &s.log}
	s.mu.Unlock()
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start fenced serve: %v", err)
	}
	waited := make(chan struct{})
	go func() { cmd.Wait(); close(waited) }()
	s.mu.Lock()
	s.cmd, s.waited = cmd, waited
	s.mu.Unlock()
}

// Kill sends SIGKILL and waits for the process to exit.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, waited := s.cmd, s.waited
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGCONT) // a stopped process must run to die
	cmd.Process.Kill()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		s.t.Errorf("fenced serve (pid %d) did not exit 10s after SIGKILL", cmd.Process.Pid)
	}
}

// Signal sends sig to the process.
func (s *Server) Signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd.Process.Signal(sig)
}

// Wait waits up to d for the process to exit and reports whether it did.
func (s *Server) Wait(d time.Duration) bool {
	s.mu.Lock()
	waited := s.waited
	s.mu.Unlock()
	select {
	case <-waited:
		return true
	case <-time.After(d):
		return false
	}
}

// ExitCode returns the exit code of an exited process (-1 if killed by a
// signal).
func (s *Server) ExitCode() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd.ProcessState.ExitCode()
}

// Log returns what the process has written so far.
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// ClusterTiming are the Raft timings cluster tests use: elections within
// about a second on a loaded machine.
var ClusterTiming = []string{"--heartbeat-timeout", "300ms", "--election-timeout", "300ms", "--leader-lease-timeout", "150ms"}

// StartCluster starts n `fenced serve` processes forming one cluster
// (node ids n1..nN) on free loopback ports and waits until every member
// is ready. extra flags go to every member.
func StartCluster(t testing.TB, n int, extra ...string) []*Server {
	t.Helper()
	servers := make([]*Server, n)
	var initial []string
	addrs := FreeAddrs(t, 2*n)
	for i := range servers {
		servers[i] = &Server{NodeID: fmt.Sprintf("n%d", i+1), Addr: addrs[2*i], PeerAddr: addrs[2*i+1], DataDir: t.TempDir(), t: t}
		initial = append(initial, servers[i].NodeID+"="+servers[i].PeerAddr)
	}
	for _, s := range servers {
		s.Args = append(append([]string{"--initial-cluster", strings.Join(initial, ",")}, ClusterTiming...), extra...)
		s.StartNoWait()
		t.Cleanup(s.Kill)
	}
	for _, s := range servers {
		testserver.WaitReady(t, s.Addr)
	}
	return servers
}

// Endpoints returns the API addresses of servers, comma-separated.
func Endpoints(servers []*Server) string {
	var eps []string
	for _, s := range servers {
		eps = append(eps, s.Addr)
	}
	return strings.Join(eps, ",")
}

func waitReady(t testing.TB, addr string) { testserver.WaitReady(t, addr) }
