package raftstore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Seed makes dataDir the data dir of a new single-node cluster whose state
// starts as snapshot (a restore: docs/operations.md). dataDir must not
// exist, or be an empty directory: Seed never writes over a member's
// state. It writes one raft snapshot (index 1, term 1) whose configuration
// is this node alone, nodeID at peerAddr, and no log; Open on it then
// resumes from that state without bootstrapping, with the same node id
// and peer address. Other members join it empty (`fenced cluster add`),
// and receive the state from it. On error it leaves nothing behind (a
// directory it created is removed).
func Seed(dataDir, nodeID, peerAddr string, snapshot []byte) (err error) {
	if nodeID == "" || peerAddr == "" {
		return errors.New("raftstore: seed: a node id and a peer address are needed")
	}
	entries, err := os.ReadDir(dataDir)
	created := errors.Is(err, os.ErrNotExist)
	switch {
	case created:
	case err != nil:
		return fmt.Errorf("seed data dir %s: %w", dataDir, err)
	case len(entries) > 0:
		return fmt.Errorf("seed data dir %s: the directory is not empty; a restore builds a new data dir and never writes over one", dataDir)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("create data dir %s: %w", dataDir, err)
	}
	lock, err := lockDataDir(dataDir)
	if err != nil {
		return err
	}
	raftDir := filepath.Join(dataDir, "raft")
	defer func() {
		_ = lock.release()
		if err != nil {
			_ = os.RemoveAll(raftDir)
			_ = os.Remove(filepath.Join(dataDir, lockFileName))
			if created {
				_ = os.Remove(dataDir)
			}
		}
	}()
	snaps, err := openSnapshotStore(raftDir, 1, hclog.NewNullLogger())
	if err != nil {
		return err
	}
	_, trans := raft.NewInmemTransport(raft.ServerAddress(peerAddr))
	conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(nodeID), Address: raft.ServerAddress(peerAddr)}}}
	sink, err := snaps.Create(raft.SnapshotVersionMax, 1, 1, conf, 1, trans)
	if err != nil {
		return fmt.Errorf("seed data dir %s: create snapshot: %w", dataDir, err)
	}
	if _, err := sink.Write(snapshot); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("seed data dir %s: write snapshot: %w", dataDir, err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("seed data dir %s: write snapshot: %w", dataDir, err)
	}
	// Read it back as Open will.
	if err := checkNewestSnapshot(snaps, filepath.Join(raftDir, "snapshots")); err != nil {
		return err
	}
	_, rc, err := snaps.Open(sink.ID())
	if err != nil {
		return fmt.Errorf("seed data dir %s: read the snapshot back: %w", dataDir, err)
	}
	defer rc.Close()
	back, err := io.ReadAll(rc)
	if err != nil || string(back) != string(snapshot) {
		return fmt.Errorf("seed data dir %s: the snapshot read back differs from what was written (%v)", dataDir, err)
	}
	return nil
}
