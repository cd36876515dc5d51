package proctest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fenced-dev/fenced/internal/faultproxy"
)

// Links are the directed peer links of a cluster, each through its own
// proxy, so a test can cut any of them.
type Links struct {
	servers []*Server
	proxy   map[[2]int]*faultproxy.Proxy // (from, to) -> proxy to "to"'s peer address
}

// StartClusterWithLinks starts a cluster like StartCluster with every
// member dialing each peer through a proxy of its own. The members run the
// test build (FaultBinary): the dial hook exists only there.
func StartClusterWithLinks(t testing.TB, n int, extra ...string) ([]*Server, *Links) {
	t.Helper()
	servers := make([]*Server, n)
	var initial []string
	addrs := FreeAddrs(t, 2*n)
	for i := range servers {
		servers[i] = &Server{NodeID: fmt.Sprintf("n%d", i+1), Addr: addrs[2*i], PeerAddr: addrs[2*i+1], DataDir: t.TempDir(), t: t}
		initial = append(initial, servers[i].NodeID+"="+servers[i].PeerAddr)
	}
	links := &Links{servers: servers, proxy: map[[2]int]*faultproxy.Proxy{}}
	for i, s := range servers {
		var via []string
		for j, peer := range servers {
			if i == j {
				continue
			}
			// Proxies on their own loopback address: their ephemeral ports
			// cannot take a port picked for a node.
			p, err := faultproxy.Listen("127.0.0.3:0", peer.PeerAddr)
			if err != nil {
				t.Fatalf("proxy %s->%s: %v", s.NodeID, peer.NodeID, err)
			}
			t.Cleanup(func() { p.Close() })
			links.proxy[[2]int{i, j}] = p
			via = append(via, peer.PeerAddr+"="+p.Addr())
		}
		s.Env, s.Faults = []string{"FENCED_TEST_DIAL_VIA=" + strings.Join(via, ",")}, true
		s.Args = append(append([]string{"--initial-cluster", strings.Join(initial, ",")}, ClusterTiming...), extra...)
		s.StartNoWait()
		t.Cleanup(s.Kill)
	}
	for _, s := range servers {
		waitReady(t, s.Addr)
	}
	return servers, links
}

// Isolate cuts every link to and from member i (a blackhole: packets
// dropped, connections stall).
func (l *Links) Isolate(i int) {
	for k, p := range l.proxy {
		if k[0] == i || k[1] == i {
			p.SetMode(faultproxy.Blackhole)
		}
	}
}

// Heal restores every link.
func (l *Links) Heal() {
	for _, p := range l.proxy {
		p.SetMode(faultproxy.Pass)
	}
}
