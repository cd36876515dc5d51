package raftstore

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fenced-dev/fenced/internal/tlsfiles"
)

// Transport settings: connections pooled per peer and the I/O deadline of
// one RPC, as Consul and Nomad use them.
const (
	transportMaxPool = 3
	transportTimeout = 10 * time.Second
)

// Node is one member of a Raft group: hashicorp/raft with its log on
// raft-wal, file snapshots and a TCP transport. Its methods are safe for
// concurrent use. Create it with Open and stop it with Shutdown.
type Node struct {
	cfg    Config
	logger *slog.Logger
	raft   *raft.Raft
	trans  *gatedTransport
	gate   *peerGate
	// peerTLS is the peer port's identity; nil without TLS.
	peerTLS *tlsfiles.Reloader
	logs    *logStore
	lock    *dirLock
	disk    *diskMonitor

	// mu guards closing, lead and known, and orders inflight.Add before
	// inflight.Wait.
	mu       sync.Mutex
	closing  bool
	inflight sync.WaitGroup // raft calls (entries, barriers, checks) in progress
	lead     Leadership
	// leadChanged is lead.Changed, closed when lead is replaced.
	leadChanged chan struct{}
	known       KnownLeader
	// knownChanged is known.Changed, closed when known is replaced.
	knownChanged chan struct{}

	fsm *fsmAdapter
	sm  StateMachine
	// acks records the AppendEntries the peers accepted (ConfirmLeader);
	// lease is the same tracker with Config.LeaseReads, nil without.
	acks     *leaseTracker
	lease    *leaseTracker
	proposer proposer

	watchStop chan struct{} // closed to stop the leadership watcher
	watchDone chan struct{} // closed when the leadership watcher returned
	done      chan struct{} // closed when Raft has stopped
	shutdown  sync.Once     // runs Shutdown's work once
	shutErr   error         // Shutdown's result

	failMu  sync.Mutex
	failure error // why the node stopped on its own; see Err
}

// Open starts a node on cfg.DataDir with sm as its state machine, creating
// the data dir (mode 0700) when missing. With cfg.Bootstrap, a data dir
// without Raft state becomes a single-node cluster with this node as its
// only voter; a data dir that has state is never bootstrapped again.
//
// Open fails with an error wrapping ErrDataDirInUse when another process (or
// another open Node) holds the data dir.
//
// On return sm holds the latest snapshot, if any. Log entries after it are
// applied once this node learns the commit index: on a leader, once it has
// committed an entry of its own term, which Barrier waits for.
func Open(cfg Config, sm StateMachine) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if sm == nil {
		return nil, errors.New("raftstore: open: state machine is nil")
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	hl := newHCLogger(logger, "raft")

	// cleanup undoes the steps done so far when a later one fails.
	var cleanup []func()
	fail := func(err error) (*Node, error) {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
		return nil, err
	}

	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir %s: %w", cfg.DataDir, err)
	}
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	cleanup = append(cleanup, func() { _ = lock.release() })

	raftDir := filepath.Join(cfg.DataDir, "raft")
	// raft and raft-wal get the stores through wrappers that record every
	// write's outcome (diskhealth.go).
	disk := newDiskMonitor(cfg, logger)
	walDir := filepath.Join(raftDir, "wal")
	logs, err := openLogStore(walDir, cfg.WALSegmentSize, hl.Named("wal"), logger, disk)
	if err != nil {
		return fail(err)
	}
	cleanup = append(cleanup, func() { _ = logs.close() })

	snaps, err := openSnapshotStore(raftDir, cfg.SnapshotRetain, hl.Named("snapshots"))
	if err != nil {
		return fail(err)
	}
	if err := checkNewestSnapshot(snaps, filepath.Join(raftDir, "snapshots")); err != nil {
		return fail(err)
	}
	fsm := &fsmAdapter{sm: sm, where: func(index uint64) string { return segmentFile(walDir, index) }, log: logger}

	var peerTLS *tlsfiles.Reloader
	if cfg.PeerTLS.Enabled() {
		if peerTLS, err = tlsfiles.LoadNode(cfg.PeerTLS, cfg.NodeID); err != nil {
			return fail(fmt.Errorf("peer TLS: %w", err))
		}
	}
	gate := newPeerGate(cfg.NodeID, logger)
	acks := newLeaseTracker(cfg)
	var lease *leaseTracker
	if cfg.LeaseReads {
		lease = acks
	}
	trans, err := newTransport(cfg, gate, acks, peerTLS, hl.Named("transport"))
	if err != nil {
		return fail(fmt.Errorf("listen for raft peers on %s: %w", cfg.PeerListen, err))
	}
	cleanup = append(cleanup, func() { _ = trans.Close() })

	notify := make(chan bool, 1)
	rc := cfg.raftConfig()
	rc.Logger = hl
	rc.NotifyCh = notify
	if err := raft.ValidateConfig(rc); err != nil {
		return fail(fmt.Errorf("raftstore: invalid raft config: %w", err))
	}

	mlogs, msnaps := monitoredLog{logStore: logs, m: disk}, monitoredSnapshots{SnapshotStore: snaps, m: disk}

	hasState, err := raft.HasExistingState(logs, logs, snaps)
	if err != nil {
		return fail(fmt.Errorf("read raft state in %s: %w", raftDir, err))
	}
	switch {
	case hasState:
		logger.Info("raft: resuming from existing state", "data_dir", cfg.DataDir, "node_id", cfg.NodeID)
	case len(cfg.InitialCluster) > 0:
		var servers []raft.Server
		for _, p := range cfg.InitialCluster {
			servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr)})
		}
		if err := raft.BootstrapCluster(rc, logs, logs, snaps, trans, raft.Configuration{Servers: servers}); err != nil {
			return fail(fmt.Errorf("bootstrap cluster %v in %s: %w", cfg.InitialCluster, cfg.DataDir, err))
		}
		logger.Info("raft: bootstrapped cluster", "data_dir", cfg.DataDir, "node_id", cfg.NodeID, "members", len(servers))
	case cfg.Bootstrap:
		self := raft.Server{Suffrage: raft.Voter, ID: rc.LocalID, Address: trans.LocalAddr()}
		if err := raft.BootstrapCluster(rc, logs, logs, snaps, trans, raft.Configuration{Servers: []raft.Server{self}}); err != nil {
			return fail(fmt.Errorf("bootstrap single-node cluster in %s: %w", cfg.DataDir, err))
		}
		logger.Info("raft: bootstrapped single-node cluster", "data_dir", cfg.DataDir, "node_id", cfg.NodeID, "addr", string(self.Address))
	default:
		logger.Info("raft: no state and no bootstrap; waiting to be added to a cluster", "data_dir", cfg.DataDir, "node_id", cfg.NodeID)
	}

	r, err := raft.NewRaft(rc, fsm, newLogCache(mlogs, cfg.LogCacheEntries), mlogs, msnaps, trans)
	if err != nil {
		if ferr := fsm.err(); ferr != nil {
			err = ferr
		}
		return fail(fmt.Errorf("start raft in %s: %w", raftDir, err))
	}
	// A snapshot that passed its checksum but did not restore: raft went
	// on to an older one, but this node stops rather than run on a state
	// it cannot trust.
	if err := fsm.err(); err != nil {
		_ = r.Shutdown().Error()
		return fail(fmt.Errorf("start raft in %s: %w", raftDir, err))
	}
	gate.raft.Store(r)

	n := &Node{
		cfg:       cfg,
		logger:    logger,
		raft:      r,
		trans:     trans,
		gate:      gate,
		peerTLS:   peerTLS,
		logs:      logs,
		lock:      lock,
		disk:      disk,
		fsm:       fsm,
		sm:        sm,
		acks:      acks,
		lease:     lease,
		proposer:  proposer{window: cfg.MaxEntriesInFlight},
		watchStop: make(chan struct{}),
		watchDone: make(chan struct{}),
		done:      make(chan struct{}),
	}
	n.leadChanged = make(chan struct{})
	n.lead = Leadership{Changed: n.leadChanged}
	n.knownChanged = make(chan struct{})
	n.known = KnownLeader{Changed: n.knownChanged}
	observed := make(chan raft.Observation, 1)
	r.RegisterObserver(raft.NewObserver(observed, true, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	}))
	// A change before the observer was registered is read here.
	n.setKnownLeader()
	go n.watchLeadership(notify, observed)
	if err := fsm.watch(n.stop); err != nil {
		n.stop(err)
	}
	return n, nil
}

// stop is called once when the state machine adapter stopped for good (a
// log entry that does not decode, a state machine that cannot go on): it
// logs why and shuts the node down, so that it takes no part in the
// cluster on a state it cannot trust. Err returns the cause.
func (n *Node) stop(err error) {
	n.failMu.Lock()
	n.failure = err
	n.failMu.Unlock()
	n.logger.Error("raft: node stopped: it cannot apply the log", "node_id", n.cfg.NodeID, "data_dir", n.cfg.DataDir, "err", err)
	go n.Shutdown()
}

// Err returns why the node stopped on its own, or nil while it runs or when
// it was shut down by Shutdown. A node stops on its own when a committed
// log entry does not decode (the error wraps ErrDamaged and names the
// entry's index and log file, or ErrNewerFormat when a newer release wrote
// it: Codec.Decode) or when the state machine cannot go on
// (StateMachine.Apply's error); Done is closed once it has stopped. A
// process serving the node should exit with the error: restarting it on
// the same data dir fails the same way until an operator has looked.
func (n *Node) Err() error {
	n.failMu.Lock()
	defer n.failMu.Unlock()
	return n.failure
}

// ID returns this node's ID, Config.NodeID.
func (n *Node) ID() string { return n.cfg.NodeID }

// Addr returns the address the Raft transport listens on and advertises:
// Config.PeerListen with the port filled in when it was 0.
func (n *Node) Addr() string { return string(n.trans.LocalAddr()) }

// ReloadTLS reads the peer certificate, key and CA files again; new peer
// connections use them, established ones are left alone. Without peer TLS
// it does nothing. When the files do not load, the node keeps the identity
// it had and the error says why.
func (n *Node) ReloadTLS() error {
	if n.peerTLS == nil {
		return nil
	}
	return n.peerTLS.Reload()
}

// IsLeader reports whether this node is the leader now. The answer may be
// stale by the time the caller acts on it; Propose checks again.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Term returns the node's current Raft term, whatever its role. It is one
// atomic load. To stamp commands with the term of this node's leadership,
// use Leadership().Term, which cannot move on to a later term while the
// snapshot says Leader.
func (n *Node) Term() uint64 { return n.raft.CurrentTerm() }

// Leader returns the ID and address of the leader this node knows of, or
// empty strings when it knows none.
func (n *Node) Leader() (id, addr string) {
	a, i := n.raft.LeaderWithID()
	return string(i), string(a)
}

// Done returns a channel closed when the node has shut down.
func (n *Node) Done() <-chan struct{} { return n.done }

// Shutdown stops the node: new calls fail with ErrShutdown, calls in flight
// get up to Config.ShutdownTimeout to finish, then Raft stops (commands it
// had not committed fail with an error wrapping ErrOutcomeUnknown), the
// transport closes, the log is closed and the data dir unlocked. Shutdown
// takes no snapshot: the log is durable as it is. It is safe to call more
// than once; later calls return the first call's result.
func (n *Node) Shutdown() error {
	n.shutdown.Do(func() { n.shutErr = n.doShutdown() })
	return n.shutErr
}

func (n *Node) doShutdown() error {
	n.mu.Lock()
	n.closing = true
	n.mu.Unlock()

	// Give calls in flight their chance to finish.
	if n.cfg.ShutdownTimeout > 0 {
		drained := make(chan struct{})
		go func() {
			n.inflight.Wait()
			close(drained)
		}()
		t := time.NewTimer(n.cfg.ShutdownTimeout)
		select {
		case <-drained:
		case <-t.C:
			n.logger.Warn("raft: shutdown timeout reached with calls in flight; their outcome is unknown", "timeout", n.cfg.ShutdownTimeout)
		}
		t.Stop()
	}

	var errs []error
	// Waits for every raft goroutine, then closes the transport.
	if err := n.raft.Shutdown().Error(); err != nil {
		errs = append(errs, fmt.Errorf("stop raft: %w", err))
	}
	close(n.done)
	close(n.watchStop)
	<-n.watchDone
	n.setLeadership(false, 0, true)
	n.endKnownLeader()

	if err := n.logs.close(); err != nil {
		errs = append(errs, fmt.Errorf("close raft log: %w", err))
	}
	if err := n.lock.release(); err != nil {
		errs = append(errs, fmt.Errorf("unlock data dir %s: %w", n.cfg.DataDir, err))
	}
	n.logger.Info("raft: shut down", "node_id", n.cfg.NodeID)
	return errors.Join(errs...)
}

// Snapshot takes a snapshot of the state machine now and lets raft drop
// the log entries it covers beyond Config.TrailingLogs, as it does on its
// own every SnapshotInterval past SnapshotThreshold entries.
func (n *Node) Snapshot() error {
	if err := n.raft.Snapshot().Error(); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	return nil
}
