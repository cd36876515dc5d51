package check

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/fenced-dev/fenced/internal/faultproxy"
	"github.com/fenced-dev/fenced/internal/launch"
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
	proc *launch.Process
}

// cluster is the system under test: nodes, a proxy on every directed peer
// link (so partitions can be cut link by link) and a proxy in front of
// every node's API (clients reach the nodes through them).
type cluster struct {
	bin      string
	dir      string
	knobs    []string // test knobs every node gets (negative controls)
	nodes    []*node
	links    *launch.Links
	apiProxy []*faultproxy.Proxy
	initial  string
	sec      security // certificates and auth file of a secure run
}

// startCluster starts n nodes under dir and waits until they serve.
// With secure, every node serves its API over TLS and its peer port on
// mutual TLS, and asks every caller for a bearer token (see newSecurity).
func startCluster(ctx context.Context, bin, dir string, n int, knobs []string, secure bool) (*cluster, error) {
	c := &cluster{bin: bin, dir: dir, knobs: knobs}
	planned, err := launch.Plan(n, func(id string) string { return filepath.Join(dir, id) })
	if err != nil {
		return nil, err
	}
	if secure {
		if c.sec, err = newSecurity(dir, planned); err != nil {
			return nil, err
		}
	}
	for _, p := range planned {
		nd := &node{id: p.ID, api: p.Addr, peer: p.PeerAddr, dataDir: p.DataDir}
		nd.eventLog = filepath.Join(dir, nd.id+".events.jsonl")
		nd.logPath = filepath.Join(dir, nd.id+".log")
		c.nodes = append(c.nodes, nd)
	}
	c.initial = launch.InitialCluster(planned)
	if c.links, err = launch.NewLinks(planned); err != nil {
		return nil, err
	}
	for i, nd := range c.nodes {
		nd.env = c.links.Env(i)
		p, err := launch.NewProxy(nd.api)
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
	args := append(c.launchNode(i).ServeArgs(), c.sec.serveArgs()...)
	args = append(append(append(args, launch.Timing...), launch.SmallLog...), "--test-event-log", nd.eventLog)
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
	p, err := launch.Start(launch.Spec{Bin: c.bin, Args: args, Env: nd.env, Out: logf, OwnGroup: true, OnExit: func() { logf.Close() }})
	if err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", nd.id, err)
	}
	nd.mu.Lock()
	nd.proc = p
	nd.mu.Unlock()
	return nil
}

// launchNode describes node i for internal/launch.
func (c *cluster) launchNode(i int) launch.Node {
	nd := c.nodes[i]
	return launch.Node{ID: nd.id, Addr: nd.api, PeerAddr: nd.peer, DataDir: nd.dataDir, CertsDir: c.sec.certsDir}
}

// process is node i's running (or last) process, nil before the first
// start.
func (c *cluster) process(i int) *launch.Process {
	nd := c.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.proc
}

// signal sends sig to node i (no-op when it is not running).
func (c *cluster) signal(i int, sig syscall.Signal) {
	if p := c.process(i); p != nil {
		p.Signal(sig)
	}
}

// kill SIGKILLs node i and waits for it to exit.
func (c *cluster) kill(i int) {
	if p := c.process(i); p != nil {
		p.Kill(10 * time.Second)
	}
}

// waitReady waits until node i answers /readyz with 200.
func (c *cluster) waitReady(ctx context.Context, i int, d time.Duration) error {
	if err := c.launchNode(i).WaitReady(ctx, d); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("node %s not ready after %v; its log is %s", c.nodes[i].id, d, c.nodes[i].logPath)
	}
	return nil
}

// isolate cuts every peer link to and from the nodes in set.
func (c *cluster) isolate(set map[int]bool) {
	c.links.Isolate(set)
}

// oneWay drops the traffic from node i to node j only.
func (c *cluster) oneWay(i, j int) {
	c.links.OneWay(i, j)
}

// heal restores every peer and client link.
func (c *cluster) heal() {
	c.links.Heal()
	for _, p := range c.apiProxy {
		p.SetMode(faultproxy.Pass)
	}
}

// close kills every node and closes every proxy.
func (c *cluster) close() {
	for i := range c.nodes {
		c.kill(i)
	}
	if c.links != nil {
		c.links.Close()
	}
	for _, p := range c.apiProxy {
		p.Close()
	}
}
