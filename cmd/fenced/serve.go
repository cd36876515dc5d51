package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/raftstore"
	"github.com/fenced-dev/fenced/server"
)

func newServeCommand() *cobra.Command {
	cfg := server.DefaultConfig()
	var tokenFloor uint64
	var logLevel, initialCluster string
	var join bool
	var eventLog, pprofAddr string
	var kvScopes []string
	var configPath string
	var dryRun bool
	var gcHeapFloorMiB int
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a fenced server (a single-node cluster in ./fenced-data by default)",
		Long: `Run a fenced server. With no flags it bootstraps (or reopens) a single-node
cluster in ./fenced-data, serves the API on 127.0.0.1:7700 and Raft on
127.0.0.1:7701. SIGTERM or SIGINT shuts it down gracefully. SIGUSR1 takes a
Raft snapshot now and compacts the log (as the node does on its own past
--snapshot-threshold entries); the log says how long it took.

Without TLS it serves loopback addresses only, unless --insecure-listen-any
is given. --cert/--key serve the API over TLS; --peer-cert/--peer-key/
--peer-ca put the peer port on mutual TLS. SIGHUP reloads the certificate
files. Whether TLS is on or off, the peer port refuses Raft messages from
anyone who is not a member.

--auth-file requires a bearer token or a client certificate of an identity
on every API call and checks the identity's permissions on the call's name
(fenced auth token makes tokens, fenced auth cert names certificates);
SIGHUP reloads it too. --require-client-cert refuses TLS connections
without a client certificate of --ca. Without it the API is open to anyone who can reach
it. --audit-log records authentication failures, denials and admin actions.

Every flag can also be set in the file of --config ("flag-name = value"
lines, # comments) and in the environment (FENCED_SERVE_DATA_DIR for
--data-dir): the command line wins over the environment, which wins over
the file. --dry-run checks the settings and prints those that differ from
the defaults in the file's form, and starts nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if configPath == "" {
				configPath = os.Getenv(configEnv)
			}
			if err := applySettings(cmd.Flags(), configPath, os.Environ()); err != nil {
				return usageError("%v", err)
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return usageError("--log-level %q: want debug, info, warn or error", logLevel)
			}
			cfg.Logger = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			if tokenFloor > uint64(fence.MaxToken) {
				return usageError("--token-floor %d is above the maximum token %d", tokenFloor, uint64(fence.MaxToken))
			}
			cfg.TokenFloor = fence.Token(tokenFloor)
			for _, s := range kvScopes {
				m, err := server.ParseKVScope(s)
				if err != nil {
					return usageError("--kv-scope: %v", err)
				}
				cfg.KVScopes = append(cfg.KVScopes, m)
			}
			if err := applyFaultEnv(&cfg); err != nil {
				return err
			}
			if eventLog != "" {
				f, err := os.OpenFile(eventLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
				if err != nil {
					return usageError("--test-event-log: %v", err)
				}
				defer f.Close()
				cfg.Test.EventLog = f
			}
			if join {
				if initialCluster != "" {
					return usageError("--join and --initial-cluster exclude each other: a joining node is added by \"fenced cluster add\"")
				}
				cfg.Raft.Bootstrap = false
			}
			if initialCluster != "" {
				peers, err := raftstore.ParseInitialCluster(initialCluster)
				if err != nil {
					return usageError("--initial-cluster: %v", err)
				}
				cfg.Raft.InitialCluster = peers
			}
			if err := cfg.Validate(); err != nil {
				return usageError("%v", err)
			}
			if gcHeapFloorMiB < 0 || gcHeapFloorMiB > maxGCHeapFloorMiB {
				return usageError("--gc-heap-floor-mib %d: want 0 (off) to %d", gcHeapFloorMiB, maxGCHeapFloorMiB)
			}
			if dryRun {
				return writeSettings(cmd.OutOrStdout(), cmd.Flags())
			}
			defer startGCHeapFloor(cfg.Logger, gcHeapFloorMiB)()
			if pprofAddr != "" {
				if err := servePprof(pprofAddr); err != nil {
					return usageError("--pprof: %v", err)
				}
			}
			return serve(cmd.Context(), cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&configPath, "config", "", "read settings from this file: \"flag-name = value\" lines (# comments); the environment (FENCED_SERVE_FLAG_NAME) and the command line win over it (env FENCED_SERVE_CONFIG)")
	f.BoolVar(&dryRun, "dry-run", false, "check the settings (command line, environment, --config), print those that differ from the defaults in the --config form, and exit without starting")
	f.StringVar(&cfg.Raft.DataDir, "data-dir", cfg.Raft.DataDir, "directory for the Raft log, snapshots and state")
	f.StringVar(&cfg.Listen, "listen", cfg.Listen, "API address (gRPC, JSON over HTTP, /metrics, /healthz, /readyz)")
	f.StringVar(&cfg.Raft.PeerListen, "peer-listen", cfg.Raft.PeerListen, "Raft peer address")
	f.StringVar(&cfg.Raft.NodeID, "node-id", cfg.Raft.NodeID, "this node's id in the cluster")
	f.Uint64Var(&tokenFloor, "token-floor", 0, "issue only tokens above N (for a fresh cluster replacing another; only ever raises the counter)")
	f.IntVar(&cfg.SignBatchMax, "sign-batch-max", cfg.SignBatchMax, "the most grants signed with one Ed25519 signature: grants that wait while one is signed are signed together, over the root of their batch, each with its proof (fg2. grants; docs/signed-grants.md); 1 signs every grant alone (fg1.)")
	f.Uint64Var(&cfg.TokenReserveBlock, "token-reserve-block", cfg.TokenReserveBlock, "tokens reserved at a time: the end of each block is fsynced to DATA-DIR/token-reservation before its tokens are issued, and the counter restarts above it after a restart or leader change")
	f.StringVar(&initialCluster, "initial-cluster", "", "bootstrap a new cluster of these voters: ID=HOST:PORT,... (peer addresses; the same on every member; ignored once the data dir has state)")
	f.BoolVar(&join, "join", false, "start without bootstrapping and wait to be added with \"fenced cluster add ID PEER-ADDR\"")
	f.BoolVar(&cfg.SignGrants, "sign-grants", cfg.SignGrants, "sign every grant handed to a holder with the cluster's Ed25519 key (Grant.signed, X-Fencing-Grant), for resources behind guard.Signed; the keys are kept and published at /.well-known/fenced-keys either way")
	f.DurationVar(&cfg.LockDelay, "lock-delay", 0, "lock delay of an acquire that asks for none: after its session expires or is revoked (never after a release), a lock is granted to no one for this long (0: off, at most 1m). A mitigation for resources that cannot check tokens, not a safety mechanism")
	f.BoolVar(&cfg.AllowRevoke, "allow-revoke", false, "without --auth-file: enable \"fenced revoke\" (force-revoke of a lock's holder) for anyone who can reach the API (with --auth-file, identities with admin on the name may revoke)")
	f.StringVar(&cfg.AuthFile, "auth-file", "", "require a bearer token or a client certificate of an identity on every API call: identities, token hashes or certificate identities, and roles, one JSON line each (fenced auth token and fenced auth cert print them); SIGHUP reloads it. Without it the API is open to anyone who can reach it")
	f.StringVar(&cfg.Audit.File, "audit-log", "", "append authentication failures, denials and admin actions to this file as JSON lines")
	f.Int64Var(&cfg.Audit.MaxBytes, "audit-log-max-bytes", 64<<20, "rotate --audit-log when it would grow past this many bytes (FILE.1, FILE.2, ...); 0 never rotates")
	f.IntVar(&cfg.Audit.Keep, "audit-log-keep", 5, "rotated audit log files to keep")
	f.StringVar(&cfg.AdvertiseAddr, "advertise", "", "API address other members forward requests to (default: the --listen address)")
	f.DurationVar(&cfg.Raft.HeartbeatTimeout, "heartbeat-timeout", cfg.Raft.HeartbeatTimeout, "Raft heartbeat timeout: a follower that hears nothing from the leader for this long starts an election")
	f.DurationVar(&cfg.Raft.ElectionTimeout, "election-timeout", cfg.Raft.ElectionTimeout, "Raft election timeout")
	f.DurationVar(&cfg.Raft.LeaderLeaseTimeout, "leader-lease-timeout", cfg.Raft.LeaderLeaseTimeout, "a leader that hears from no quorum for this long steps down (at most the heartbeat timeout)")
	f.BoolVar(&cfg.Raft.LeaseReads, "lease-reads", cfg.Raft.LeaseReads, "the leader serves linearizable reads without a quorum round trip while a quorum accepted its heartbeats less than heartbeat-timeout/(1+lease-clock-drift) ago (off by default; needs members whose clock rates differ by at most --lease-clock-drift; give every member the same setting; see docs/cluster.md)")
	f.Float64Var(&cfg.Raft.LeaseClockDrift, "lease-clock-drift", cfg.Raft.LeaseClockDrift, "with --lease-reads: the largest difference in clock rate between two members, as a fraction from 0 to 1")
	f.Uint64Var(&cfg.Raft.SnapshotThreshold, "snapshot-threshold", cfg.Raft.SnapshotThreshold, "log entries since the last snapshot that trigger a new snapshot and log compaction")
	f.DurationVar(&cfg.Raft.SnapshotInterval, "snapshot-interval", cfg.Raft.SnapshotInterval, "how often to check --snapshot-threshold")
	f.Uint64Var(&cfg.Raft.TrailingLogs, "trailing-logs", cfg.Raft.TrailingLogs, "log entries kept after a snapshot, for followers slightly behind")
	f.IntVar(&cfg.Raft.MaxEntriesInFlight, "max-entries-in-flight", cfg.Raft.MaxEntriesInFlight, "Raft entries of commands proposed together that the leader commits at once; commands proposed meanwhile wait and share the next entry (0: no limit, each group of concurrent commands is an entry at once)")
	f.IntVar(&cfg.Raft.LogCacheEntries, "log-cache-entries", cfg.Raft.LogCacheEntries, "newest Raft log entries also kept in memory, so sending them to followers and applying them does not read them back from the log file (0: off; the log on disk is written and fsynced either way)")
	f.DurationVar(&cfg.Raft.DiskStallTimeout, "disk-stall-timeout", cfg.Raft.DiskStallTimeout, "exit (status 1) when writes to the Raft log have failed this long without a success, so a supervisor restarts the node; 0 never exits")
	f.IntVar(&cfg.Metrics.PrefixDepth, "metrics-prefix-depth", cfg.Metrics.PrefixDepth, "group the per-prefix metrics (fenced_prefix_*) by the first N \"/\"-separated segments of a name (0: one group for all names); ignored with --metrics-group")
	f.StringArrayVar(&cfg.Metrics.Groups, "metrics-group", nil, "PREFIX: count the per-prefix metrics of names under PREFIX in a group of their own (repeatable; the longest matching prefix wins, other names are \"_other\"); replaces --metrics-prefix-depth")
	f.IntVar(&cfg.Metrics.MaxGroups, "metrics-max-groups", cfg.Metrics.MaxGroups, "at most this many groups in the per-prefix metrics; names of further groups are counted as \"_overflow\"")
	f.BoolVar(&cfg.LogGrants, "log-grants", false, "log every grant, release and expiry at info level as a structured event (otherwise at debug level)")
	f.IntVar(&cfg.UIMaxItems, "ui-max-items", cfg.UIMaxItems, "at most this many objects of each primitive, and sessions, in one view of the dashboard at /ui/ (1 to 10000)")
	f.IntVar(&cfg.Raft.WALSegmentSize, "wal-segment-size", 0, "bytes per Raft log segment; the log is compacted a whole segment at a time (default 64 MiB)")
	// Hooks for the fault harness (fenced check); hidden. The faults exist
	// only in a test build (serve_faults_on.go).
	f.StringVar(&eventLog, "test-event-log", "", "test only: append the committed grants, releases and expiries to this file as JSON lines")
	f.MarkHidden("test-event-log")
	addFaultFlags(f, &cfg)
	addLimitFlags(f, &cfg.Limits)
	f.IntVar(&cfg.Queue.MaxPayloadBytes, "queue-max-payload", server.DefaultQueueMaxPayloadBytes, "largest work-queue item payload in bytes (at most 1048576)")
	f.IntVar(&cfg.Queue.MaxDeliveries, "queue-max-deliveries", server.DefaultQueueMaxDeliveries, "deliveries of a work-queue item before it moves to the dead-letter queue QUEUE.dead, unless its push sets its own (1 to 1000)")
	f.IntVar(&cfg.Queue.MaxItems, "queue-max-items", server.DefaultQueueMaxItems, "most items in every work queue together (dead-letter queues included); a push past it is refused")
	f.Int64Var(&cfg.Queue.MaxBytes, "queue-max-bytes", server.DefaultQueueMaxBytes, "most payload bytes in every work queue together; a push past it is refused")
	f.IntVar(&cfg.Queue.MaxBatch, "queue-max-batch", server.DefaultQueueMaxBatch, "most items in one work-queue batch: a push batch, a batch claim, the acks of a claim or an ack batch (1 to 32)")
	f.IntVar(&cfg.Queue.DedupeKeys, "queue-dedupe-keys", server.DefaultQueueDedupeKeys, "dedupe keys each work queue remembers (oldest forgotten first): a retried push enqueues once while its key is among them")
	f.StringVar(&cfg.TLS.Cert, "cert", "", "serve the API over TLS with this certificate (PEM; see fenced certs issue --node); SIGHUP reloads it")
	f.StringVar(&cfg.TLS.Key, "key", "", "private key of --cert (PEM)")
	f.StringVar(&cfg.TLS.CA, "ca", "", "CA (PEM) that client certificates and other members' API certificates are verified against")
	f.BoolVar(&cfg.RequireClientCert, "require-client-cert", false, "mutual TLS on the API: refuse a connection without a client certificate of --ca (health checks and /metrics too); needs --cert, --key and --ca")
	f.StringVar(&cfg.Raft.PeerTLS.Cert, "peer-cert", "", "mutual TLS on the peer port with this node certificate (PEM, common name = --node-id); SIGHUP reloads it")
	f.StringVar(&cfg.Raft.PeerTLS.Key, "peer-key", "", "private key of --peer-cert (PEM)")
	f.StringVar(&cfg.Raft.PeerTLS.CA, "peer-ca", "", "cluster CA (PEM): only peers with a node certificate it signed, naming a member, are accepted")
	f.BoolVar(&cfg.InsecureListenAny, "insecure-listen-any", false, "allow --listen or --peer-listen beyond loopback without TLS (logged as a warning)")
	f.StringArrayVar(&kvScopes, "kv-scope", nil, "PREFIX=SCOPE: a kv write of a key under PREFIX (PREFIX itself or PREFIX/...) needs the token of a live grant covering SCOPE instead of the key; repeatable, the longest prefix wins; default none (every key is its own scope). Give every member the same")
	f.IntVar(&gcHeapFloorMiB, "gc-heap-floor-mib", defaultGCHeapFloorMiB, "let the Go heap grow to about this many MiB before the collector runs, while less than half of it is live (at most 65536; 0: off, GOGC 100); ignored when GOGC is set in the environment. A larger heap collects at twice its live size either way")
	f.StringVar(&pprofAddr, "pprof", "", "serve Go's /debug/pprof profiles on this address (e.g. 127.0.0.1:6060; off by default, never expose it publicly)")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error (debug logs every grant, release and expiry)")
	return cmd
}

// serve runs the server until ctx is cancelled (SIGTERM/SIGINT), then shuts
// it down gracefully; or until the server stops on its own, and then
// returns why (the process exits 1).
func serve(ctx context.Context, cfg server.Config) error {
	srv, err := server.Start(cfg)
	if err != nil {
		return err
	}
	// A JSON line like every other: the log is JSON from its first line.
	cfg.Logger.Info("serving", "api", srv.Addr(), "peer", srv.PeerAddr(), "data_dir", cfg.Raft.DataDir)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	var failed error
wait:
	for {
		select {
		case <-ctx.Done():
			break wait
		case <-hup:
			if err := srv.ReloadTLS(); err != nil {
				cfg.Logger.Error("TLS reload failed; keeping the certificates loaded before", "err", err)
			} else {
				cfg.Logger.Info("TLS certificates reloaded (SIGHUP); new connections use them")
			}
			if cfg.AuthFile != "" {
				if err := srv.ReloadAuth(); err != nil {
					cfg.Logger.Error("auth file reload failed; keeping the identities loaded before", "err", err)
				} else {
					cfg.Logger.Info("auth file reloaded (SIGHUP)", "file", cfg.AuthFile)
				}
			}
		case <-usr1:
			// Off the loop: encoding a large state takes seconds.
			go func() {
				if err := srv.TakeSnapshot(); err != nil {
					cfg.Logger.Warn("snapshot (SIGUSR1) not taken", "err", err)
					return
				}
				cfg.Logger.Info("snapshot taken (SIGUSR1)")
			}()
		case <-srv.Failed():
			failed = srv.Err()
			cfg.Logger.Error("fenced: giving up on the data dir; shutting down to exit with status 1", "err", failed)
			break wait
		case <-srv.Done():
			// Stopped on its own: a log entry that does not decode, a token
			// reservation that could not be recorded.
			if err := srv.Err(); err != nil {
				return err
			}
			return nil
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	if failed != nil {
		// Exit non-zero so that a supervisor restarts the node: a restart
		// reopens the log, and the node serves again once its disk takes
		// writes (docs/design.md §11).
		return errors.Join(fmt.Errorf("%w; exiting so that a supervisor restarts the node once the disk takes writes again", failed), err)
	}
	return err
}
