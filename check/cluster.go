package check

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fenced-dev/fenced/internal/faultproxy"
)

// node is one `fenced serve` process of the cluster under test.
type node struct {
	id       string
	api      string // the node's own API address
	peer     string // its Raft address
	dataDir  string
	eventLog string
	logPath  string
	env      []string
	extra    []string // fault flags for the next start (skew)

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// cluster is the system under test: nodes, a proxy on every directed peer
// link (so partitions can be cut link by link) and a proxy in front of
// every node's API (clients reach the nodes through them).
type cluster struct {
	bin      string
	dir      string
	knobs    []string // test knobs every node gets (negative controls)
	nodes    []*node
	links    map[[2]int]*faultproxy.Proxy
	apiProxy []*faultproxy.Proxy
	initial  string
}

// proxyHost is the loopback address the proxies listen on. The nodes use
// 127.0.0.1: a proxy's ephemeral port can then never take a port picked
// for a node that has not bound it yet.
const proxyHost = "127.0.0.3:0"

// freeAddrs returns n distinct free loopback addresses, holding each until
// all are picked so none is handed out twice.
func freeAddrs(n int) ([]string, error) {
	var addrs []string
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs, nil
}

func newProxy(target string) (*faultproxy.Proxy, error) { return faultproxy.Listen(proxyHost, target) }

// startCluster starts n nodes under dir and waits until they serve.
func startCluster(ctx context.Context, bin, dir string, n int, knobs []string) (*cluster, error) {
	c := &cluster{bin: bin, dir: dir, knobs: knobs, links: map[[2]int]*faultproxy.Proxy{}}
	var initial []string
	addrs, err := freeAddrs(2 * n)
	if err != nil {
		return nil, err
	}
	for i := 0; i < n; i++ {
		api, peer := addrs[2*i], addrs[2*i+1]
		nd := &node{id: fmt.Sprintf("n%d", i+1), api: api, peer: peer, dataDir: filepath.Join(dir, fmt.Sprintf("n%d", i+1))}
		nd.eventLog = filepath.Join(dir, nd.id+".events.jsonl")
		nd.logPath = filepath.Join(dir, nd.id+".log")
		c.nodes = append(c.nodes, nd)
		initial = append(initial, nd.id+"="+peer)
	}
	c.initial = strings.Join(initial, ",")
	for i, nd := range c.nodes {
		var via []string
		for j, peer := range c.nodes {
			if i == j {
				continue
			}
			p, err := newProxy(peer.peer)
			if err != nil {
				c.close()
				return nil, err
			}
			c.links[[2]int{i, j}] = p
			via = append(via, peer.peer+"="+p.Addr())
		}
		nd.env = []string{"FENCED_TEST_DIAL_VIA=" + strings.Join(via, ",")}
		p, err := newProxy(nd.api)
		if err != nil {
			c.close()
			return nil, err
		}
		c.apiProxy = append(c.apiProxy, p)
	}
	for i := range c.nodes {
		if err := c.start(i, true); err != nil {
			c.close()
			return nil, err
		}
	}
	for i := range c.nodes {
		if err := c.waitReady(ctx, i, 60*time.Second); err != nil {
			c.close()
			return nil, err
		}
	}
	return c, nil
}

// endpoints are the addresses clients use: the API proxies.
func (c *cluster) endpoints() []string {
	var eps []string
	for _, p := range c.apiProxy {
		eps = append(eps, p.Addr())
	}
	return eps
}

// start starts node i; bootstrap gives it the initial cluster (ignored by
// a node that has state).
func (c *cluster) start(i int, bootstrap bool) error {
	nd := c.nodes[i]
	args := []string{"serve", "--node-id", nd.id, "--listen", nd.api, "--peer-listen", nd.peer, "--data-dir", nd.dataDir,
		"--heartbeat-timeout", "300ms", "--election-timeout", "300ms", "--leader-lease-timeout", "150ms",
		"--test-event-log", nd.eventLog}
	if bootstrap {
		args = append(args, "--initial-cluster", c.initial)
	} else {
		args = append(args, "--join")
	}
	args = append(append(args, c.knobs...), nd.extra...)
	logf, err := os.OpenFile(nd.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.bin, args...)
	cmd.Env = append(os.Environ(), nd.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", nd.id, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(done) }()
	nd.mu.Lock()
	nd.cmd, nd.done = cmd, done
	nd.mu.Unlock()
	return nil
}

// signal sends sig to node i (no-op when it is not running).
func (c *cluster) signal(i int, sig syscall.Signal) {
	nd := c.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.cmd != nil && nd.cmd.Process != nil {
		nd.cmd.Process.Signal(sig)
	}
}

// kill SIGKILLs node i and waits for it to exit.
func (c *cluster) kill(i int) {
	nd := c.nodes[i]
	nd.mu.Lock()
	cmd, done := nd.cmd, nd.done
	nd.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGCONT)
	cmd.Process.Kill()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
}

// waitReady waits until node i answers /readyz with 200.
func (c *cluster) waitReady(ctx context.Context, i int, d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		resp, err := http.Get("http://" + c.nodes[i].api + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("node %s not ready after %v; its log is %s", c.nodes[i].id, d, c.nodes[i].logPath)
}

// isolate cuts every peer link to and from the nodes in set.
func (c *cluster) isolate(set map[int]bool) {
	for k, p := range c.links {
		if set[k[0]] != set[k[1]] {
			p.SetMode(faultproxy.Blackhole)
		}
	}
}

// oneWay drops the traffic from node i to node j only.
func (c *cluster) oneWay(i, j int) {
	c.links[[2]int{i, j}].SetOneWay(faultproxy.ClientToServer, true)
}

// heal restores every peer and client link.
func (c *cluster) heal() {
	for _, p := range c.links {
		p.SetOneWay(faultproxy.ClientToServer, false)
		p.SetMode(faultproxy.Pass)
	}
	for _, p := range c.apiProxy {
		p.SetMode(faultproxy.Pass)
	}
}

// close kills every node and closes every proxy.
func (c *cluster) close() {
	for i := range c.nodes {
		c.kill(i)
	}
	for _, p := range c.links {
		p.Close()
	}
	for _, p := range c.apiProxy {
		p.Close()
	}
}
