//go:build fencedfaults

package raftstore

import (
	"net"
	"time"
)

// TestHooks are the fault harness's hooks into a node. They exist only in
// a test build (build tag fencedfaults); the zero value changes nothing.
type TestHooks struct {
	// Dial, when set, opens this node's connections to peers instead of a
	// plain TCP dial, so a test can put a proxy on each directed link and
	// cut, delay or drop the traffic from this node to one peer.
	Dial func(addr string, timeout time.Duration) (net.Conn, error)

	// UncheckedLease, with Config.LeaseReads, makes the node serve every
	// read on a leader lease whenever it believes it leads, without
	// checking the lease (a negative control: a leader paused past its
	// lease then serves stale reads).
	UncheckedLease bool
}

func (h TestHooks) uncheckedLease() bool { return h.UncheckedLease }

func (h TestHooks) dial(addr string, timeout time.Duration) (net.Conn, error) {
	if h.Dial != nil {
		return h.Dial(addr, timeout)
	}
	return net.DialTimeout("tcp", addr, timeout)
}
