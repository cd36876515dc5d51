package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenced-dev/fenced/raftstore"
)

// watchReads adds the counters of linearizable reads served on the leader
// lease and of those that fell back to a quorum round trip (both stay 0
// without --lease-reads; see raftstore.Config.LeaseReads).
func (m *metrics) watchReads(node *raftstore.Node) {
	m.registry.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "fenced_lease_reads_total", Help: "Linearizable reads this node served as leader on its leader lease, without a quorum round trip (--lease-reads).",
		}, func() float64 {
			lease, _ := node.LeaseReads()
			return float64(lease)
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "fenced_lease_read_fallbacks_total", Help: "Linearizable reads this node served as leader with a quorum round trip because it held no leader lease (--lease-reads).",
		}, func() float64 {
			_, quorum := node.LeaseReads()
			return float64(quorum)
		}),
	)
}
