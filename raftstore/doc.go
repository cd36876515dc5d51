// Package raftstore replicates fenced's state machine with hashicorp/raft.
//
// A Node is one member of a Raft group. Its log and its stable state (term,
// vote) live in a raft-wal write-ahead log, its snapshots in a
// raft.FileSnapshotStore, and it talks to its peers over raft's TCP
// transport. The same code path serves the default single-node cluster and
// clusters of 3 or 5 nodes (docs/design.md §3). The layout of a data dir is:
//
//	DataDir/LOCK              flock held while a process has the dir open
//	DataDir/raft/wal/         raft-wal segments and its meta database, and
//	                          boot-id: the machine's boot when it was opened
//	DataDir/raft/snapshots/   raft.FileSnapshotStore
//
// (fenced's server keeps its token reservation beside them, in
// DataDir/token-reservation.)
//
// Every inbound Raft RPC passes a peer gate first: its sender must be a
// member of the node's latest configuration (or a node it is adding), so
// a single node accepts no peer at all. Without TLS the gate checks the
// connection's source IP and the sender named in the RPC; with
// Config.PeerTLS both directions use mutual TLS and a peer must present a
// node certificate of the cluster CA naming a member (docs/design.md §10).
//
// Open starts a node; with Config.Bootstrap a fresh data dir becomes a
// single-node cluster with this node as its only voter. A data dir that
// already holds Raft state is never bootstrapped again.
//
// The state machine is a StateMachine: raftstore decodes each committed
// entry with its Codec and hands the commands to Apply, and takes and
// restores its snapshots; no hashicorp/raft type reaches it.
//
// Damage is never skipped. Before raft-wal opens the log, Open verifies
// every batch of every segment against the CRC-32C of its commit frame
// (walcheck.go; raft-wal itself checks only the last batch, on open). A
// torn write can only hit the last batch, the one whose fsync did not
// finish, so nothing intact follows it, and only a power loss or an
// operating-system crash tears one: damage in a sealed segment, in the tail
// with an intact batch after it, or a garbled last batch while the machine
// has not restarted since the log was written (its boot id is recorded
// beside the log), makes Open fail with an error wrapping ErrDamaged that
// names the file, the byte offset and the first entry affected. After a
// restart of the machine a garbled last batch is dropped with a warning, as
// raft-wal drops a torn write (nothing tells a damaged acknowledged batch
// from one); so is a last write cut short, in any boot. Open also verifies the newest snapshot's checksum
// (raft.FileSnapshotStore keeps a CRC-64 in meta.json) and refuses to start
// when it fails, instead of letting raft fall back to an older snapshot
// the log was compacted past. While the node runs, a committed entry the
// Codec cannot decode, a snapshot that does not restore, or a
// StateMachine.Apply error stops it: it applies nothing more, fails the
// proposals waiting, logs why and shuts down; Err says why.
//
// Writes go through Propose, which groups the commands proposed at the same
// moment into one entry (group commit: one log write, one commit and one
// fsync for all of them; while Config.MaxEntriesInFlight entries are on
// their way, new commands wait and share the next one), returns only after
// the entry is committed (written to a majority's disks, fsynced) and
// applied to the local state machine, and returns the result Apply set for
// the command. It says when the outcome is unknown: a command that was
// proposed but whose commit this node could not observe (leadership lost,
// shutdown, the caller's context ended) may or may not have been applied,
// and the error wraps ErrOutcomeUnknown. Only the leader accepts writes; on
// a follower Propose fails with an error wrapping fence.ErrNotLeader.
//
// Reads of the leader's state are made linearizable with ReadIndex, which
// confirms the leadership with a quorum and waits for the state machine to
// apply everything committed at that point (woken by the applies, not by
// polling). Membership changes are AddVoter, RemoveMember and
// TransferLeadership.
//
// The server learns about leadership through Leadership, which returns the
// current view and a channel closed when it changes, so any number of
// goroutines can follow it without stealing notifications from each other.
// Leadership().Term is the term this node leads in; the state machine also
// sees the proposer's term of every entry as Command.Term. KnownLeader is
// the same for the leader this node knows of, fed by raft's leader
// observations.
//
// Every write to the data dir is recorded: DiskHealth lists the kinds of
// write (DiskOpLogAppend, DiskOpLogSegment, DiskOpLogTruncate, DiskOpStable,
// DiskOpSnapshot) whose last attempt failed, Config.OnDiskError counts them,
// and DiskStalled is closed once log or stable writes have failed for
// Config.DiskStallTimeout without a success, for the process to exit and be
// restarted (a raft-wal that could not create its next segment recovers only
// by reopening; see diskhealth.go).
//
// Basic use:
//
//	cfg := raftstore.DefaultConfig()
//	cfg.Bootstrap = true
//	node, err := raftstore.Open(cfg, sm)
//	if err != nil {
//		return err
//	}
//	defer node.Shutdown()
//	result, err := node.Propose(ctx, cmd)
package raftstore
