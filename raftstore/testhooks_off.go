//go:build !fencedfaults

package raftstore

import (
	"net"
	"time"
)

// TestHooks are the fault harness's hooks into a node. A production build
// has none: they exist only in a test build (build tag fencedfaults).
type TestHooks struct{}

func (TestHooks) dial(addr string, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", addr, timeout)
}

func (TestHooks) uncheckedLease() bool { return false }
