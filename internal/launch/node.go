package launch

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// Timing are the Raft timings of a cluster on a loaded machine: elections
// within about a second.
var Timing = []string{"--heartbeat-timeout", "300ms", "--election-timeout", "300ms", "--leader-lease-timeout", "150ms"}

// Node is one `fenced serve` of a cluster: its id, its addresses and its
// data dir.
type Node struct {
	ID       string // node id; "" lets the server pick its default
	Addr     string // API address
	PeerAddr string // Raft address
	DataDir  string
}

// ServeArgs returns the arguments of `fenced serve` for n, to which the
// caller adds its own flags.
func (n Node) ServeArgs() []string {
	args := []string{"serve", "--listen", n.Addr, "--peer-listen", n.PeerAddr, "--data-dir", n.DataDir}
	if n.ID != "" {
		args = append(args, "--node-id", n.ID)
	}
	return args
}

// Plan names n nodes n1..nN, gives each two free loopback addresses and
// the data dir dataDir(id).
func Plan(n int, dataDir func(id string) string) ([]Node, error) {
	addrs, err := FreeAddrs(2 * n)
	if err != nil {
		return nil, err
	}
	nodes := make([]Node, n)
	for i := range nodes {
		id := fmt.Sprintf("n%d", i+1)
		nodes[i] = Node{ID: id, Addr: addrs[2*i], PeerAddr: addrs[2*i+1], DataDir: dataDir(id)}
	}
	return nodes, nil
}

// InitialCluster is the value of --initial-cluster that names every node.
func InitialCluster(nodes []Node) string {
	members := make([]string, len(nodes))
	for i, n := range nodes {
		members[i] = n.ID + "=" + n.PeerAddr
	}
	return strings.Join(members, ",")
}

// FreeAddrs returns n distinct loopback addresses whose ports were free a
// moment ago, holding each until all are picked so none is handed out
// twice.
func FreeAddrs(n int) ([]string, error) {
	var addrs []string
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick a free port: %w", err)
		}
		defer ln.Close()
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs, nil
}

// WaitReady waits up to d until the server at addr answers /readyz with
// 200 (it can serve writes).
func WaitReady(ctx context.Context, addr string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := ctx.Err(); err != nil {
			return err
		}
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("server at %s not ready after %v", addr, d)
}
