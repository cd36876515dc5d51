package launch

import (
	"strings"

	"github.com/fenced-dev/fenced/internal/faultproxy"
)

// proxyHost is the loopback address proxies listen on. Nodes use
// 127.0.0.1: a proxy's ephemeral port can then never take a port picked
// for a node that has not bound it yet.
const proxyHost = "127.0.0.3:0"

// dialViaEnv is the variable through which a test build of `fenced serve`
// learns to dial a peer address through a proxy: "peer=proxy,...".
const dialViaEnv = "FENCED_TEST_DIAL_VIA"

// NewProxy starts a fault proxy to target on the proxies' loopback
// address.
func NewProxy(target string) (*faultproxy.Proxy, error) {
	return faultproxy.Listen(proxyHost, target)
}

// Links are the directed peer links of a cluster, each through a proxy of
// its own, so that any of them can be cut.
type Links struct {
	nodes []Node
	proxy map[[2]int]*faultproxy.Proxy // (from, to) -> proxy to "to"'s peer address
}

// NewLinks starts a proxy for every directed link between two of nodes.
// Each node dials its peers through them once started with Env.
func NewLinks(nodes []Node) (*Links, error) {
	l := &Links{nodes: nodes, proxy: map[[2]int]*faultproxy.Proxy{}}
	for i := range nodes {
		for j, peer := range nodes {
			if i == j {
				continue
			}
			p, err := NewProxy(peer.PeerAddr)
			if err != nil {
				l.Close()
				return nil, err
			}
			l.proxy[[2]int{i, j}] = p
		}
	}
	return l, nil
}

// Env is the environment that makes node i dial each peer through its
// own link.
func (l *Links) Env(i int) []string {
	var via []string
	for j, peer := range l.nodes {
		if p := l.proxy[[2]int{i, j}]; p != nil {
			via = append(via, peer.PeerAddr+"="+p.Addr())
		}
	}
	return []string{dialViaEnv + "=" + strings.Join(via, ",")}
}

// Isolate cuts every link between a node in set and one outside it (a
// blackhole: bytes dropped, connections stall).
func (l *Links) Isolate(set map[int]bool) {
	for k, p := range l.proxy {
		if set[k[0]] != set[k[1]] {
			p.SetMode(faultproxy.Blackhole)
		}
	}
}

// OneWay drops what node i sends to node j, and nothing else.
func (l *Links) OneWay(i, j int) {
	l.proxy[[2]int{i, j}].SetOneWay(faultproxy.ClientToServer, true)
}

// Heal restores every link.
func (l *Links) Heal() {
	for _, p := range l.proxy {
		p.SetOneWay(faultproxy.ClientToServer, false)
		p.SetMode(faultproxy.Pass)
	}
}

// Close closes every proxy.
func (l *Links) Close() {
	for _, p := range l.proxy {
		p.Close()
	}
}
