package raftstore

import (
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// streamLayer is raft's TCP stream layer. A test build may replace its
// dial (TestHooks), so a fault harness can put a proxy on each directed
// link.
type streamLayer struct {
	net.Listener
	hooks TestHooks
}

var _ raft.StreamLayer = (*streamLayer)(nil)

// Dial implements raft.StreamLayer.
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return s.hooks.dial(string(address), timeout)
}

// Addr implements raft.StreamLayer: the address peers reach this node at.
func (s *streamLayer) Addr() net.Addr { return s.Listener.Addr() }

// newTransport listens on cfg.PeerListen and returns raft's network
// transport over it.
func newTransport(cfg Config, logger hclog.Logger) (*raft.NetworkTransport, error) {
	ln, err := net.Listen("tcp", cfg.PeerListen)
	if err != nil {
		return nil, err
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); !ok || tcp.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("peer address %s is not advertisable", ln.Addr())
	}
	return raft.NewNetworkTransportWithLogger(&streamLayer{Listener: ln, hooks: cfg.Test}, transportMaxPool, transportTimeout, logger), nil
}
