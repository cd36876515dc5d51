package raftstore

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/fenced-dev/fenced/internal/tlsfiles"
)

// streamLayer is raft's TCP stream layer, with TLS when the node has a
// peer certificate. A test build may replace its dial (TestHooks), so a
// fault harness can put a proxy on each directed link.
//
// Every accepted connection passes the peer gate first: without TLS its
// source IP must be a member's, with TLS its certificate (verified during
// the handshake, before raft reads a byte of an RPC) must be a node
// certificate of the cluster CA naming a member.
type streamLayer struct {
	net.Listener
	hooks TestHooks
	gate  *peerGate
	tls   *tlsfiles.Reloader // nil: plain TCP
}

var _ raft.StreamLayer = (*streamLayer)(nil)

// Accept implements net.Listener: it returns the next connection the gate
// lets in and closes the others.
func (s *streamLayer) Accept() (net.Conn, error) {
	for {
		conn, err := s.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if s.tls != nil {
			return tls.Server(conn, s.serverConfig()), nil
		}
		if err := s.gate.checkSource(conn.RemoteAddr()); err != nil {
			conn.Close()
			continue
		}
		return conn, nil
	}
}

// serverConfig requires a node certificate of the latest cluster CA naming
// a member.
func (s *streamLayer) serverConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return s.tls.Certificate(), nil
		},
		// Verified in VerifyConnection against the pool loaded last.
		ClientAuth: tls.RequireAnyClientCert,
		VerifyConnection: func(cs tls.ConnectionState) error {
			id, err := tlsfiles.NodeIdentity(cs, s.tls.Pool())
			if err != nil {
				return s.gate.refuse("peer connection: %v", err)
			}
			return s.gate.checkIdentity(id)
		},
	}
}

// Dial implements raft.StreamLayer. With TLS the peer must show a node
// certificate of the cluster CA naming the member at address.
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	conn, err := s.hooks.dial(string(address), timeout)
	if err != nil || s.tls == nil {
		return conn, err
	}
	tc := tls.Client(conn, &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return s.tls.Certificate(), nil
		},
		// Peers are named by node id, not host name: the certificate is
		// verified against the cluster CA and the member at address below.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			id, err := tlsfiles.NodeIdentity(cs, s.tls.Pool())
			if err != nil {
				return err
			}
			if want, ok := s.gate.memberAt(string(address)); ok && want != id {
				return fmt.Errorf("peer at %s presented the certificate of node %q, not of member %q", address, id, want)
			}
			return s.gate.checkIdentity(id)
		},
	})
	tc.SetDeadline(time.Now().Add(timeout))
	if err := tc.Handshake(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("TLS handshake with peer %s: %w", address, err)
	}
	tc.SetDeadline(time.Time{})
	return tc, nil
}

// Addr implements raft.StreamLayer: the address peers reach this node at.
func (s *streamLayer) Addr() net.Addr { return s.Listener.Addr() }

// gatedTransport is raft's network transport with every inbound RPC
// checked by the peer gate before raft sees it: an RPC whose sender is not
// a member is answered with an error and changes nothing.
// hashicorp/raft's NetworkTransport has no hook per RPC, so raft is handed
// a channel of its own, fed by a goroutine that reads the transport's.
type gatedTransport struct {
	*raft.NetworkTransport
	gate     *peerGate
	acks     *leaseTracker
	hold     voteHold
	consumer chan raft.RPC
	stop     chan struct{}
	stopOnce sync.Once
}

var (
	_ raft.Transport   = (*gatedTransport)(nil)
	_ raft.WithClose   = (*gatedTransport)(nil)
	_ raft.WithPreVote = (*gatedTransport)(nil)
)

// newTransport listens on cfg.PeerListen and returns raft's network
// transport over it, behind the peer gate. It records the AppendEntries
// the peers accept in acks; with lease reads it holds votes for
// HeartbeatTimeout.
func newTransport(cfg Config, gate *peerGate, acks *leaseTracker, peerTLS *tlsfiles.Reloader, logger hclog.Logger) (*gatedTransport, error) {
	ln, err := net.Listen("tcp", cfg.PeerListen)
	if err != nil {
		return nil, err
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); !ok || tcp.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("peer address %s is not advertisable", ln.Addr())
	}
	stream := &streamLayer{Listener: ln, hooks: cfg.Test, gate: gate, tls: peerTLS}
	t := &gatedTransport{
		NetworkTransport: raft.NewNetworkTransportWithLogger(stream, transportMaxPool, transportTimeout, logger),
		gate:             gate,
		acks:             acks,
		consumer:         make(chan raft.RPC),
		stop:             make(chan struct{}),
	}
	if cfg.LeaseReads {
		t.hold = voteHold{until: leaseClock() + cfg.HeartbeatTimeout}
	}
	go t.filter()
	return t, nil
}

// filter passes the RPCs the gate lets through on to raft.
func (t *gatedTransport) filter() {
	in := t.NetworkTransport.Consumer()
	for {
		select {
		case rpc := <-in:
			if err := t.gate.checkRPC(rpc); err != nil {
				rpc.Respond(nil, err)
				continue
			}
			if t.hold.refuses(rpc) {
				rpc.Respond(nil, errVoteHeld)
				continue
			}
			select {
			case t.consumer <- rpc:
			case <-t.stop:
				rpc.Respond(nil, raft.ErrTransportShutdown)
				return
			}
		case <-t.stop:
			return
		}
	}
}

// errVoteHeld answers a vote request in the vote hold after a start.
var errVoteHeld = errors.New("raftstore: no vote in the first heartbeat timeout after a start (lease reads)")

// AppendEntries implements raft.Transport. It records the send time of
// every AppendEntries the peer accepted in the request's term (raft's
// heartbeats come through here, every tenth of the heartbeat timeout),
// which ConfirmLeader and the leader lease are measured from.
func (t *gatedTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	sent := leaseClock()
	err := t.NetworkTransport.AppendEntries(id, target, args, resp)
	if err == nil && resp.Success && resp.Term == args.Term {
		t.acks.ack(id, args.Term, sent)
	}
	return err
}

// Consumer implements raft.Transport: the RPCs the gate let through.
func (t *gatedTransport) Consumer() <-chan raft.RPC { return t.consumer }

// SetHeartbeatHandler implements raft.Transport: heartbeats take raft's
// fast path past the consumer channel, so they are checked here.
func (t *gatedTransport) SetHeartbeatHandler(cb func(rpc raft.RPC)) {
	if cb == nil {
		t.NetworkTransport.SetHeartbeatHandler(nil)
		return
	}
	t.NetworkTransport.SetHeartbeatHandler(func(rpc raft.RPC) {
		if err := t.gate.checkRPC(rpc); err != nil {
			rpc.Respond(nil, err)
			return
		}
		cb(rpc)
	})
}

// Close implements raft.WithClose.
func (t *gatedTransport) Close() error {
	t.stopOnce.Do(func() { close(t.stop) })
	return t.NetworkTransport.Close()
}
