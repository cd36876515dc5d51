package raftstore

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/internal/tlsfiles"
)

// Config configures a Node. Start from DefaultConfig; Validate explains any
// value Open would refuse.
type Config struct {
	// NodeID names this node in the Raft configuration. It must be unique in
	// the cluster and must not change across restarts. Default "n1".
	NodeID string

	// DataDir holds the node's state: the lock file and, under DataDir/raft,
	// the write-ahead log (wal/) and snapshots (snapshots/). It is created
	// with mode 0700 when missing. Default "./fenced-data".
	DataDir string

	// PeerListen is the TCP address the Raft transport binds, and the
	// address this node advertises to its peers, so its host must be a
	// specific address (not 0.0.0.0 or ::). Port 0 picks a free port (see
	// Node.Addr); the bootstrap configuration records the port picked, so
	// members of a multi-node cluster need a fixed port. Default
	// "127.0.0.1:7701".
	PeerListen string

	// Bootstrap makes a data dir without Raft state a single-node cluster
	// with this node (NodeID at PeerListen) as its only voter. It is ignored
	// when the data dir already has state: a cluster is bootstrapped once.
	// Without Bootstrap, a fresh node waits to be added to a cluster.
	Bootstrap bool

	// InitialCluster, when not empty, makes a data dir without Raft state
	// a new cluster of these voters; it must list this node (NodeID at
	// PeerListen) and be the same on every member. Like Bootstrap it is
	// ignored once the data dir has state, so a restarted member needs no
	// flags beyond its addresses.
	InitialCluster []Peer

	// PeerTLS, when it names files, puts the peer port on mutual TLS: the
	// node presents PeerTLS.Cert (a node certificate whose common name is
	// NodeID) on its listener and when it dials, and accepts only peers
	// presenting a node certificate of the CA in PeerTLS.CA that names a
	// member. All three files are needed. Node.ReloadTLS reads them again.
	PeerTLS TLSFiles

	// Test holds the fault harness's hooks (a dial hook); they exist only
	// in a test build (build tag fencedfaults).
	Test TestHooks

	// HeartbeatTimeout is how long a follower waits without contact from
	// the leader before it starts an election. Default 500ms.
	HeartbeatTimeout time.Duration

	// ElectionTimeout is how long a candidate waits for an election to
	// finish before it starts another. At least HeartbeatTimeout. Default 1s.
	ElectionTimeout time.Duration

	// LeaderLeaseTimeout is how long a leader stays leader without contact
	// from a majority before it steps down. At most HeartbeatTimeout.
	// Default 500ms.
	LeaderLeaseTimeout time.Duration

	// LeaseReads lets the leader serve a read (ReadIndex) without a quorum
	// round trip while it holds a leader lease: a quorum accepted an
	// AppendEntries it sent less than HeartbeatTimeout / (1 +
	// LeaseClockDrift) ago, on its boot-time clock (lease.go says why that
	// suffices). Without a lease it asks the quorum as before. It also makes
	// the node refuse votes for HeartbeatTimeout after it starts; give every
	// member the same setting. The lease relies on the members' clock rates
	// differing by at most LeaseClockDrift; docs/cluster.md says what it
	// does not promise. Default false.
	LeaseReads bool

	// LeaseClockDrift is the largest difference in clock rate between two
	// members that LeaseReads allows for, as a fraction (0.1: one member's
	// clock may run up to 10% faster than another's). From 0 to 1.
	// Default 0.1.
	LeaseClockDrift float64

	// CommitTimeout is the longest time a leader goes without sending an
	// AppendEntries to followers, so they learn the commit index.
	// Default 50ms.
	CommitTimeout time.Duration

	// SnapshotThreshold is how many log entries past the last snapshot make
	// the node take a new one (checked every SnapshotInterval).
	// Default 8192.
	SnapshotThreshold uint64

	// SnapshotInterval is how often the node checks SnapshotThreshold.
	// Default 2m.
	SnapshotInterval time.Duration

	// TrailingLogs is how many log entries a snapshot leaves in the log, so
	// a slightly lagging follower catches up from the log rather than from
	// a snapshot. Default 10240.
	TrailingLogs uint64

	// WALSegmentSize is the size of one log segment file in bytes. The log
	// is compacted a whole segment at a time, so entries a snapshot covers
	// stay on disk (and are sent to lagging followers instead of the
	// snapshot) until their segment is full. 0 means raft-wal's default
	// (64 MiB).
	WALSegmentSize int

	// MaxEntriesInFlight is how many entries of commands proposed together
	// (group commit, Propose) the leader commits at once. While that many
	// are on their way, newly proposed commands wait and go together into
	// the next entry when one of them is committed and applied, so under
	// load every member writes, fsyncs and replicates fewer, larger entries
	// for the same commands. 0 sets no limit: every group of commands
	// proposed at the same moment becomes an entry at once. Default 1.
	MaxEntriesInFlight int

	// LogCacheEntries is how many of the newest log entries the node keeps
	// in memory besides the log on disk, so that replicating an entry to
	// the followers (on the leader) and applying it (on a follower) reads
	// it from memory instead of the segment file. The log on disk is
	// written and fsynced as without it. Each entry is at most 2 MiB of
	// commands proposed together (usually far less), so this bounds the
	// memory the cache holds to LogCacheEntries times that. 0 turns the
	// cache off. Default 256.
	LogCacheEntries int

	// SnapshotRetain is how many snapshots are kept on disk. Default 2.
	SnapshotRetain int

	// ShutdownTimeout bounds how long Shutdown waits for entries, barriers,
	// leadership checks and membership changes in flight to finish before
	// it stops Raft; proposals still waiting then fail with an error
	// wrapping ErrOutcomeUnknown, the others with ErrShutdown. 0 stops Raft
	// at once.
	// Default 5s.
	ShutdownTimeout time.Duration

	// DiskStallTimeout is how long appending to the log or storing the
	// term and vote may fail without one success before the node gives up:
	// Node.DiskStalled is closed, and the server exits so that a supervisor
	// restarts it (a stuck raft-wal recovers only by reopening the log).
	// 0 never gives up. Default 30s.
	DiskStallTimeout time.Duration

	// OnDiskError, when set, is called for every failed write to the data
	// dir with its kind (a DiskOp constant) and error, for a metric. It
	// runs on raft's goroutines and must be quick.
	OnDiskError func(op string, err error)

	// Logger receives the node's logs and those of hashicorp/raft and
	// raft-wal. Nil means slog.Default().
	Logger *slog.Logger

	// OnApply, when set, is called for every Raft entry Propose writes (one
	// command, or the commands proposed at the same moment) with the time
	// from handing it to raft to its commit and apply, and the error of
	// that wait (nil when the entry was committed and applied). It runs on
	// the goroutine committing the entry and must be quick: it is meant for
	// a latency histogram.
	OnApply func(d time.Duration, err error)
}

// TLSFiles names the PEM files of a TLS identity: certificate, key and
// the CA the other side is verified against.
type TLSFiles = tlsfiles.Files

// Peer is a member of the Raft group: its node id and peer address.
type Peer struct {
	ID   string
	Addr string
}

// ParseInitialCluster parses "n1=127.0.0.1:7701,n2=127.0.0.1:7711" (the
// --initial-cluster flag). Ids and addresses must be unique.
func ParseInitialCluster(s string) ([]Peer, error) {
	var peers []Peer
	ids, addrs := map[string]bool{}, map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		id, addr, ok := strings.Cut(part, "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("initial cluster member %q: want ID=HOST:PORT", part)
		}
		if err := validatePeerListen(addr); err != nil {
			return nil, fmt.Errorf("initial cluster member %q: %w", id, err)
		}
		if ids[id] {
			return nil, fmt.Errorf("initial cluster lists node id %q twice; ids must be unique", id)
		}
		if addrs[addr] {
			return nil, fmt.Errorf("initial cluster lists address %s twice; each member needs its own peer address", addr)
		}
		ids[id], addrs[addr] = true, true
		peers = append(peers, Peer{ID: id, Addr: addr})
	}
	if len(peers) == 0 {
		return nil, fmt.Errorf("initial cluster is empty; want ID=HOST:PORT[,ID=HOST:PORT...]")
	}
	return peers, nil
}

// DefaultConfig returns the configuration of the embedded default: node
// "n1", data in ./fenced-data, peers on 127.0.0.1:7701, timings for one
// machine or a LAN. Bootstrap is false; the caller decides.
func DefaultConfig() Config {
	return Config{
		NodeID:             "n1",
		DataDir:            "./fenced-data",
		PeerListen:         "127.0.0.1:7701",
		HeartbeatTimeout:   500 * time.Millisecond,
		ElectionTimeout:    1000 * time.Millisecond,
		LeaderLeaseTimeout: 500 * time.Millisecond,
		CommitTimeout:      50 * time.Millisecond,
		LeaseClockDrift:    0.1,
		SnapshotThreshold:  8192,
		SnapshotInterval:   2 * time.Minute,
		TrailingLogs:       10240,
		LogCacheEntries:    256,
		MaxEntriesInFlight: 1,
		SnapshotRetain:     2,
		ShutdownTimeout:    5 * time.Second,
		DiskStallTimeout:   30 * time.Second,
	}
}

// minTimeout is the smallest timing hashicorp/raft accepts; maxTimeout
// the largest this package accepts.
const (
	minTimeout = 5 * time.Millisecond
	maxTimeout = 10 * time.Minute
)

// maxLogCacheEntries is the largest Config.LogCacheEntries: a cache is a
// slice of that many pointers, allocated at once.
const maxLogCacheEntries = 1 << 16

// Validate reports every value of c that Open would refuse, each with what
// is allowed instead. It returns nil when c is usable.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(format, args...))
	}

	if err := fence.ValidateNodeID(c.NodeID); err != nil {
		errs = append(errs, err)
	}
	if c.DataDir == "" {
		bad("data dir is empty; want a directory path such as %q", "./fenced-data")
	}
	if err := validatePeerListen(c.PeerListen); err != nil {
		errs = append(errs, err)
	}

	// The upper bounds keep hashicorp/raft's arithmetic on them (a random
	// extra of up to the timeout itself) from overflowing.
	within := func(name string, d, min, max time.Duration) {
		switch {
		case d < min:
			bad("%s is %v; want at least %v", name, d, min)
		case d > max:
			bad("%s is %v; want at most %v", name, d, max)
		}
	}
	within("heartbeat timeout", c.HeartbeatTimeout, minTimeout, maxTimeout)
	within("election timeout", c.ElectionTimeout, minTimeout, maxTimeout)
	within("leader lease timeout", c.LeaderLeaseTimeout, minTimeout, maxTimeout)
	within("commit timeout", c.CommitTimeout, time.Millisecond, maxTimeout)
	within("snapshot interval", c.SnapshotInterval, minTimeout, 24*time.Hour)
	if c.HeartbeatTimeout >= minTimeout && c.ElectionTimeout >= minTimeout && c.ElectionTimeout < c.HeartbeatTimeout {
		bad("election timeout %v is shorter than heartbeat timeout %v; it must be at least the heartbeat timeout", c.ElectionTimeout, c.HeartbeatTimeout)
	}
	if c.HeartbeatTimeout >= minTimeout && c.LeaderLeaseTimeout > c.HeartbeatTimeout {
		bad("leader lease timeout %v is longer than heartbeat timeout %v; it must be at most the heartbeat timeout", c.LeaderLeaseTimeout, c.HeartbeatTimeout)
	}
	if !(c.LeaseClockDrift >= 0 && c.LeaseClockDrift <= 1) {
		bad("lease clock drift is %v; want a fraction from 0 to 1 (default %v)", c.LeaseClockDrift, DefaultConfig().LeaseClockDrift)
	}
	if c.SnapshotThreshold == 0 {
		bad("snapshot threshold is 0; want at least 1 log entry (default %d)", DefaultConfig().SnapshotThreshold)
	}
	if c.LogCacheEntries < 0 || c.LogCacheEntries > maxLogCacheEntries {
		bad("log cache is %d entries; want 0 (off) to %d (default %d)", c.LogCacheEntries, maxLogCacheEntries, DefaultConfig().LogCacheEntries)
	}
	if c.MaxEntriesInFlight < 0 {
		bad("max entries in flight is %d; want 0 (no limit) or more (default %d)", c.MaxEntriesInFlight, DefaultConfig().MaxEntriesInFlight)
	}
	if c.SnapshotRetain < 1 {
		bad("snapshot retain is %d; want at least 1 snapshot kept", c.SnapshotRetain)
	}
	if c.ShutdownTimeout < 0 {
		bad("shutdown timeout is %v; want 0 or more", c.ShutdownTimeout)
	}
	if c.DiskStallTimeout < 0 {
		bad("disk stall timeout is %v; want 0 (never give up) or more", c.DiskStallTimeout)
	}

	if err := c.PeerTLS.Check("peer-", true); err != nil {
		errs = append(errs, err)
	}

	if len(c.InitialCluster) > 0 {
		var self *Peer
		for i := range c.InitialCluster {
			if c.InitialCluster[i].ID == c.NodeID {
				self = &c.InitialCluster[i]
			}
		}
		switch {
		case self == nil:
			bad("initial cluster does not list this node %q; add %s=%s", c.NodeID, c.NodeID, c.PeerListen)
		case self.Addr != c.PeerListen:
			bad("initial cluster gives node %q the address %s but its peer address is %s; they must match", c.NodeID, self.Addr, c.PeerListen)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("raftstore: invalid config: %w", errors.Join(errs...))
}

// validatePeerListen checks that addr is host:port with an advertisable host.
func validatePeerListen(addr string) error {
	if addr == "" {
		return fmt.Errorf("peer listen address is empty; want host:port such as %q", "127.0.0.1:7701")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("peer listen address %q is not host:port (%v); want such as %q", addr, err, "127.0.0.1:7701")
	}
	if host == "" {
		return fmt.Errorf("peer listen address %q has no host; peers need an address to reach this node, such as %q", addr, "127.0.0.1"+addr)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("peer listen address %q is a wildcard; peers need a specific address to reach this node, such as this machine's LAN IP", addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("peer listen address %q has port %q; want a number from 0 to 65535", addr, port)
	}
	return nil
}

// raftConfig translates c into hashicorp/raft's configuration.
func (c Config) raftConfig() *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.NodeID)
	rc.HeartbeatTimeout = c.HeartbeatTimeout
	rc.ElectionTimeout = c.ElectionTimeout
	rc.LeaderLeaseTimeout = c.LeaderLeaseTimeout
	rc.CommitTimeout = c.CommitTimeout
	rc.SnapshotThreshold = c.SnapshotThreshold
	rc.SnapshotInterval = c.SnapshotInterval
	rc.TrailingLogs = c.TrailingLogs
	// fenced exports its own metrics; raft's go-metrics are not wired up.
	rc.NoLegacyTelemetry = true
	// Proposals queue in a buffer (of MaxAppendEntries) instead of each
	// proposer waiting for the leader loop to take it: the loop, busy
	// writing one batch, finds the next one waiting. Apply's own enqueue
	// timeout no longer bounds the wait then; Node.Propose's context does.
	rc.BatchApplyCh = true
	return rc
}
