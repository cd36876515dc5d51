// Package proctest runs real fenced processes for tests: it builds the
// fenced binary once per test binary and starts `fenced serve` as a child
// process that tests can SIGKILL, SIGSTOP and SIGCONT. It is the testing
// front of internal/launch, which starts the processes and links of the
// fault harness too.
package proctest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/internal/launch"
	"github.com/fenced-dev/fenced/internal/testserver"
)

// build is one fenced binary built from this source tree, once per test
// binary, into a temporary directory that Main removes.
type build struct {
	tags string
	once sync.Once
	dir  string
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
		b.dir = dir
		// Any user may run the binary: a test can start a server as an
		// unprivileged user (Server.Credential).
		if err := os.Chmod(dir, 0o755); err != nil {
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

// Main runs a package's tests (m.Run) and then removes the fenced binaries
// they built (about 50 MiB each, which a run of the whole suite otherwise
// leaves behind in the temporary directory). A package that uses Binary or
// FaultBinary calls it from TestMain: os.Exit(proctest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	for _, b := range []*build{plainBuild, faultBuild} {
		if b.dir != "" {
			os.RemoveAll(b.dir)
		}
	}
	return code
}

// FreeAddr returns a loopback address with a port that was free a moment
// ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return FreeAddrs(t, 1)[0]
}

// FreeAddrs returns n distinct free loopback addresses, holding each until
// all are picked so none is handed out twice.
func FreeAddrs(t testing.TB, n int) []string {
	t.Helper()
	addrs, err := launch.FreeAddrs(n)
	if err != nil {
		t.Fatal(err)
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
	// Credential, if set, runs the process as that user (the test must run
	// as root); the data dir must be theirs.
	Credential *syscall.Credential
	CertsDir   string // TLS on the API and peer port with NodeID's certificate here (launch.IssueCerts)

	t    testing.TB
	mu   sync.Mutex
	proc *launch.Process
	log  bytes.Buffer
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
	s.WaitReady()
}

// WaitReady waits until the server can serve writes (over TLS when it has
// certificates), failing the test after 20s.
func (s *Server) WaitReady() {
	s.t.Helper()
	if s.CertsDir == "" {
		testserver.WaitReady(s.t, s.Addr)
		return
	}
	if err := s.node().WaitReady(context.Background(), 20*time.Second); err != nil {
		s.t.Fatal(err)
	}
}

// node is s as internal/launch describes it.
func (s *Server) node() launch.Node {
	return launch.Node{ID: s.NodeID, Addr: s.Addr, PeerAddr: s.PeerAddr, DataDir: s.DataDir, CertsDir: s.CertsDir}
}

// StartNoWait (re)starts the process without waiting for it to be ready.
func (s *Server) StartNoWait() {
	s.t.Helper()
	n := s.node()
	bin := Binary(s.t)
	if s.Faults {
		bin = FaultBinary(s.t)
	}
	p, err := launch.Start(launch.Spec{Bin: bin, Args: append(append(n.ServeArgs(), launch.SmallLog...), s.Args...), Env: s.Env, Credential: s.Credential, Out: &lockedWriter{&s.mu, &s.log}})
	if err != nil {
		s.t.Fatalf("start fenced serve: %v", err)
	}
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
}

// process is the running (or last) process.
func (s *Server) process() *launch.Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc
}

// Kill sends SIGKILL and waits for the process to exit.
func (s *Server) Kill() {
	p := s.process()
	if p == nil {
		return
	}
	if !p.Kill(10 * time.Second) {
		s.t.Errorf("fenced serve (pid %d) did not exit 10s after SIGKILL", p.Pid())
	}
}

// Signal sends sig to the process.
func (s *Server) Signal(sig syscall.Signal) error { return s.process().Signal(sig) }

// Wait waits up to d for the process to exit and reports whether it did.
func (s *Server) Wait(d time.Duration) bool { return s.process().Wait(d) }

// ExitCode returns the exit code of an exited process (-1 if killed by a
// signal).
func (s *Server) ExitCode() int { return s.process().ExitCode() }

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
var ClusterTiming = launch.Timing

// StartCluster starts n `fenced serve` processes forming one cluster
// (node ids n1..nN) on free loopback ports and waits until every member
// is ready. extra flags go to every member.
func StartCluster(t testing.TB, n int, extra ...string) []*Server {
	t.Helper()
	servers, _ := startCluster(t, n, false, "", extra)
	return servers
}

// StartClusterTLS starts a cluster like StartCluster with TLS on every
// member's API and mutual TLS on the peer ports, from a CA and node
// certificates made in a temporary directory, which it returns.
func StartClusterTLS(t testing.TB, n int, extra ...string) ([]*Server, string) {
	t.Helper()
	dir := t.TempDir()
	servers, _ := startCluster(t, n, false, dir, extra)
	return servers, dir
}

// startCluster starts a cluster of n, with a proxy on every directed peer
// link when withLinks is set and with TLS certificates made in certsDir
// when it is not empty.
func startCluster(t testing.TB, n int, withLinks bool, certsDir string, extra []string) ([]*Server, *launch.Links) {
	t.Helper()
	nodes, err := launch.Plan(n, func(string) string { return t.TempDir() })
	if err != nil {
		t.Fatal(err)
	}
	if certsDir != "" {
		if err := launch.IssueCerts(certsDir, nodes); err != nil {
			t.Fatal(err)
		}
	}
	var links *launch.Links
	if withLinks {
		if links, err = launch.NewLinks(nodes); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(links.Close)
	}
	initial := launch.InitialCluster(nodes)
	servers := make([]*Server, n)
	for i, nd := range nodes {
		s := &Server{NodeID: nd.ID, Addr: nd.Addr, PeerAddr: nd.PeerAddr, DataDir: nd.DataDir, CertsDir: nd.CertsDir, t: t}
		s.Args = append(append([]string{"--initial-cluster", initial}, ClusterTiming...), extra...)
		if links != nil {
			s.Env, s.Faults = links.Env(i), true
		}
		s.StartNoWait()
		t.Cleanup(s.Kill)
		servers[i] = s
	}
	for _, s := range servers {
		s.WaitReady()
	}
	return servers, links
}

// Endpoints returns the API addresses of servers, comma-separated.
func Endpoints(servers []*Server) string {
	var eps []string
	for _, s := range servers {
		eps = append(eps, s.Addr)
	}
	return strings.Join(eps, ",")
}
