package raftstore

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/raft"
)

// Snapshots. raft.FileSnapshotStore (raft v1.8.0, file_snapshot.go) keeps
// a CRC-64 of each snapshot's state file in its meta.json and verifies it
// in Open, before the state is read. On start raft restores the newest
// snapshot that opens and restores, and silently goes on to an older one
// when the newest fails. An older snapshot is only right when the log
// still holds every entry after it; the log is compacted up to the newest
// snapshot, so raftstore does not let raft fall back: it verifies the
// newest snapshot before raft starts and refuses to start when it is
// damaged, and a snapshot that passes its checksum but does not restore
// stops the node (fsmAdapter.Restore).

// checkNewestSnapshot opens (and so verifies the checksum of) the newest
// snapshot in snaps, stored in dir. It returns an error wrapping
// ErrDamaged, naming the snapshot, when it does not open.
func checkNewestSnapshot(snaps raft.SnapshotStore, dir string) error {
	list, err := snaps.List()
	if err != nil {
		return fmt.Errorf("list raft snapshots in %s: %w", dir, err)
	}
	// raft lists only the snapshots whose meta.json reads; a newer one
	// whose meta.json does not is damaged too.
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("read raft snapshots in %s: %w", dir, err)
	}
	for _, e := range entries {
		var term, index, ms uint64
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		if _, err := fmt.Sscanf(e.Name(), "%d-%d-%d", &term, &index, &ms); err != nil {
			continue
		}
		if len(list) == 0 || term > list[0].Term || (term == list[0].Term && index > list[0].Index) {
			return fmt.Errorf("%w: snapshot %s has no readable metadata (meta.json); refusing to start on an older state. Restore the data dir from a backup, or remove it and let this member rejoin its cluster",
				ErrDamaged, filepath.Join(dir, e.Name()))
		}
	}
	if len(list) == 0 {
		return nil
	}
	newest := list[0]
	_, rc, err := snaps.Open(newest.ID)
	if err != nil {
		return fmt.Errorf("%w: snapshot %s (index %d, term %d) does not open: %w; refusing to start: the log was compacted up to it, so an older snapshot would lose entries. Restore the data dir from a backup, or remove it and let this member rejoin its cluster",
			ErrDamaged, filepath.Join(dir, newest.ID), newest.Index, newest.Term, err)
	}
	return rc.Close()
}
