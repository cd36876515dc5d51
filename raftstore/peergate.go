package raftstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// ErrPeerRefused is the error a refused peer connection or Raft RPC gets:
// its sender is not a member of this node's latest configuration (nor a
// node being added by this node).
var ErrPeerRefused = errors.New("raftstore: peer refused")

// peerGate decides who may talk Raft to this node: the members of the
// latest configuration this node knows (committed or not) other than
// itself, plus a node this node is adding right now. A single node with no
// peers therefore accepts no peer at all. A node with no configuration yet
// (started without bootstrap, waiting to be added) accepts any sender, as
// it has nobody to compare with: that window lasts until the first
// AppendEntries of its cluster gives it the configuration.
//
// Without TLS a sender is whoever it says it is: the gate checks the
// source IP of a connection against the hosts of the members' peer
// addresses and the (id, address) an RPC names itself by against the
// members, which keeps out a host that is not a member but not one that
// can send from a member's IP and names a member. With TLS the node
// certificate, verified against the cluster CA, names the sender.
type peerGate struct {
	self string
	log  *slog.Logger
	raft atomic.Pointer[raft.Raft]

	mu      sync.Mutex
	pending map[string]string // node id -> peer address, while AddVoter runs

	// refusals counts refused connections and RPCs.
	refusals atomic.Uint64
	// lastLog is when a refusal was last logged (unix nanoseconds), and
	// logged the count at that time: refusals are logged at most once per
	// refuseLogEvery, with how many were not.
	lastLog atomic.Int64
	logged  atomic.Uint64
}

// refuseLogEvery is the shortest interval between two refusal logs: a
// member left behind may refuse its leader's heartbeats many times a
// second.
const refuseLogEvery = time.Second

func newPeerGate(self string, log *slog.Logger) *peerGate {
	return &peerGate{self: self, log: log, pending: map[string]string{}}
}

// members returns the latest configuration's servers and the pending
// additions, and whether this node has a configuration at all. Before
// raft runs it has none to show, and everything is refused.
func (g *peerGate) members() (servers []raft.Server, known bool) {
	r := g.raft.Load()
	if r == nil {
		return nil, true
	}
	f := r.GetConfiguration()
	if f.Error() != nil {
		return nil, true
	}
	servers = f.Configuration().Servers
	known = len(servers) > 0
	g.mu.Lock()
	for id, addr := range g.pending {
		servers = append(servers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(addr)})
	}
	g.mu.Unlock()
	return servers, known
}

// adding records id at addr as a node being added until done is called.
func (g *peerGate) adding(id, addr string) (done func()) {
	g.mu.Lock()
	g.pending[id] = addr
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		delete(g.pending, id)
		g.mu.Unlock()
	}
}

// refuse counts and logs a refusal and returns its error.
func (g *peerGate) refuse(format string, args ...any) error {
	n := g.refusals.Add(1)
	err := fmt.Errorf("%w: "+format, append([]any{ErrPeerRefused}, args...)...)
	now, last := time.Now().UnixNano(), g.lastLog.Load()
	if now-last >= int64(refuseLogEvery) && g.lastLog.CompareAndSwap(last, now) {
		prev := g.logged.Swap(n)
		g.log.Warn("raft: refused a peer", "err", err, "unlogged_refusals", n-prev-1)
	}
	return err
}

// checkSender checks the id and peer address an RPC names its sender by:
// they must be a member's (not this node's own) or a pending addition's.
func (g *peerGate) checkSender(id, addr string) error {
	servers, known := g.members()
	if !known {
		return nil
	}
	if id == g.self {
		return g.refuse("RPC claims to come from this node (%s at %s)", id, addr)
	}
	for _, s := range servers {
		if string(s.ID) == id && string(s.Address) == addr {
			return nil
		}
	}
	return g.refuse("RPC from %q at %s: not a member of this node's configuration", id, addr)
}

// checkRPC checks the header of a Raft RPC.
func (g *peerGate) checkRPC(rpc raft.RPC) error {
	h, ok := rpc.Command.(raft.WithRPCHeader)
	if !ok {
		return g.refuse("RPC %T carries no sender", rpc.Command)
	}
	hdr := h.GetRPCHeader()
	if len(hdr.ID) == 0 || len(hdr.Addr) == 0 {
		return g.refuse("RPC %T names no sender id and address", rpc.Command)
	}
	return g.checkSender(string(hdr.ID), string(hdr.Addr))
}

// checkIdentity checks a peer's verified certificate identity: a member's
// node id (not this node's), or a pending addition's.
func (g *peerGate) checkIdentity(id string) error {
	servers, known := g.members()
	if !known {
		return nil
	}
	if id == g.self {
		return g.refuse("certificate of this node (%s) presented by a peer", id)
	}
	for _, s := range servers {
		if string(s.ID) == id {
			return nil
		}
	}
	return g.refuse("certificate of node %q: not a member of this node's configuration", id)
}

// memberAt returns the id of the member or pending addition at addr.
func (g *peerGate) memberAt(addr string) (string, bool) {
	servers, _ := g.members()
	for _, s := range servers {
		if string(s.Address) == addr {
			return string(s.ID), true
		}
	}
	return "", false
}

// resolveTimeout bounds the lookup of a member's host name when a
// connection is checked.
const resolveTimeout = 2 * time.Second

// checkSource checks, without TLS, that a connection comes from the IP of
// some member's peer address (a host name is resolved). Members must dial
// from the address they advertise for this to let them in.
func (g *peerGate) checkSource(remote net.Addr) error {
	servers, known := g.members()
	if !known {
		return nil
	}
	tcp, ok := remote.(*net.TCPAddr)
	if !ok {
		return g.refuse("connection from %s: not TCP", remote)
	}
	for _, s := range servers {
		if string(s.ID) == g.self {
			continue
		}
		host, _, err := net.SplitHostPort(string(s.Address))
		if err != nil {
			continue
		}
		if ip := net.ParseIP(host); ip != nil {
			if ip.Equal(tcp.IP) {
				return nil
			}
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
		ips, _ := net.DefaultResolver.LookupIPAddr(ctx, host)
		cancel()
		for _, ip := range ips {
			if ip.IP.Equal(tcp.IP) {
				return nil
			}
		}
	}
	return g.refuse("connection from %s: not the address of a member", tcp.IP)
}
