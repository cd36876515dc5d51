package proctest

import (
	"testing"

	"github.com/fenced-dev/fenced/internal/launch"
)

// Links are the directed peer links of a cluster, each through its own
// proxy, so a test can cut any of them.
type Links struct {
	links *launch.Links
}

// StartClusterWithLinks starts a cluster like StartCluster with every
// member dialing each peer through a proxy of its own. The members run the
// test build (FaultBinary): the dial hook exists only there.
func StartClusterWithLinks(t testing.TB, n int, extra ...string) ([]*Server, *Links) {
	t.Helper()
	servers, links := startCluster(t, n, true, "", extra)
	return servers, &Links{links: links}
}

// Isolate cuts every link to and from member i (a blackhole: packets
// dropped, connections stall).
func (l *Links) Isolate(i int) { l.links.Isolate(map[int]bool{i: true}) }

// Heal restores every link.
func (l *Links) Heal() { l.links.Heal() }
