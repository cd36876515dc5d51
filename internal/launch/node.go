package launch

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fenced-dev/fenced/internal/tlsfiles"
)

// Timing are the Raft timings of a cluster on a loaded machine: elections
// within about a second.
var Timing = []string{"--heartbeat-timeout", "300ms", "--election-timeout", "300ms", "--leader-lease-timeout", "150ms"}

// TestSegmentBytes is the Raft log segment size of throwaway nodes (tests
// and fenced check). raft-wal preallocates every segment file, and at the
// default of 64 MiB a 3-node test cluster took 192 MiB of disk before it
// logged anything; a clean-clone CI run ran out of disk with several of
// them at once. 1 MiB also makes those runs roll segments over often.
const TestSegmentBytes = 1 << 20

// SmallLog are the flags that give a throwaway node TestSegmentBytes
// segments; flags given after them win.
var SmallLog = []string{"--wal-segment-size", strconv.Itoa(TestSegmentBytes)}

// Node is one `fenced serve` of a cluster: its id, its addresses and its
// data dir.
type Node struct {
	ID       string // node id; "" lets the server pick its default
	Addr     string // API address
	PeerAddr string // Raft address
	DataDir  string
	// CertsDir, when set, is a `fenced certs` directory holding the CA and
	// a node certificate for ID (see IssueCerts): the node serves its API
	// over TLS and its peer port on mutual TLS with them.
	CertsDir string
}

// ServeArgs returns the arguments of `fenced serve` for n, to which the
// caller adds its own flags.
func (n Node) ServeArgs() []string {
	args := []string{"serve", "--listen", n.Addr, "--peer-listen", n.PeerAddr, "--data-dir", n.DataDir}
	if n.ID != "" {
		args = append(args, "--node-id", n.ID)
	}
	if n.CertsDir != "" {
		ca, cert, key := n.tlsFiles()
		args = append(args, "--cert", cert, "--key", key, "--ca", ca, "--peer-cert", cert, "--peer-key", key, "--peer-ca", ca)
	}
	return args
}

// tlsFiles are the CA, certificate and key of n in n.CertsDir.
func (n Node) tlsFiles() (ca, cert, key string) {
	return filepath.Join(n.CertsDir, tlsfiles.CACertFile), filepath.Join(n.CertsDir, n.ID+".crt"), filepath.Join(n.CertsDir, n.ID+".key")
}

// IssueCerts creates a CA in dir and a node certificate for each of nodes,
// and sets their CertsDir to dir.
func IssueCerts(dir string, nodes []Node) error {
	if _, err := tlsfiles.InitCA(dir, 24*time.Hour); err != nil {
		return err
	}
	for i := range nodes {
		if _, _, err := tlsfiles.Issue(dir, tlsfiles.Node, nodes[i].ID, nil, 24*time.Hour); err != nil {
			return err
		}
		nodes[i].CertsDir = dir
	}
	return nil
}

// HTTPClient returns a client for n's API: one that verifies the node's
// certificate against the CA of n.CertsDir and presents the node's own
// (for a server with --require-client-cert), or http.DefaultClient
// without TLS; and the base URL of the API.
func (n Node) HTTPClient() (*http.Client, string, error) {
	if n.CertsDir == "" {
		return http.DefaultClient, "http://" + n.Addr, nil
	}
	ca, certFile, keyFile := n.tlsFiles()
	pool, err := tlsfiles.LoadPool(ca)
	if err != nil {
		return nil, "", err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, "", err
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}
	return &http.Client{Transport: tr}, "https://" + n.Addr, nil
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
	return waitReady(ctx, http.DefaultClient, "http://"+addr, d)
}

// WaitReady waits up to d until n answers /readyz with 200, over TLS when
// n has certificates.
func (n Node) WaitReady(ctx context.Context, d time.Duration) error {
	hc, base, err := n.HTTPClient()
	if err != nil {
		return err
	}
	if hc != http.DefaultClient {
		defer hc.CloseIdleConnections()
	}
	return waitReady(ctx, hc, base, d)
}

func waitReady(ctx context.Context, hc *http.Client, base string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := ctx.Err(); err != nil {
			return err
		}
		resp, err := hc.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("server at %s not ready after %v", base, d)
}
