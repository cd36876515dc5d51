package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/fsm"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/raftstore"
	"github.com/fenced-dev/fenced/server"
)

func newSnapshotCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Back up the cluster's state and restore it into a new cluster",
		Long: `fenced snapshot save writes a consistent, checksummed copy of the whole state,
taken from the leader (admin; audited). fenced snapshot restore builds the
data dir of a NEW single-node cluster from it, offline: a new issuer epoch
(issuer X becomes X.e2) whose tokens are all above a token floor you
choose, with the old issuer recorded in its lineage. See docs/operations.md.`,
	}
	lineage := clusterCommand("lineage", "The cluster's issuer and the restores it descends from", exactArgs(0),
		func(ctx context.Context, cmd *cobra.Command, c *client.Client, f *clientFlags, args []string) error {
			issuer, restores, err := c.Lineage(ctx)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if f.json {
				return json.NewEncoder(w).Encode(map[string]any{"issuer": issuer, "restores": lineageJSON(restores)})
			}
			fmt.Fprintf(w, "issuer %s\n", shown(issuer))
			printLineage(w, restores)
			return nil
		})
	cmd.AddCommand(newSnapshotSaveCommand(), newSnapshotInspectCommand(), newSnapshotRestoreCommand(), lineage)
	return cmd
}

func newSnapshotSaveCommand() *cobra.Command {
	var force bool
	cmd := clusterCommand("save FILE", "Save a consistent copy of the whole state to FILE (admin)", exactArgs(1),
		func(ctx context.Context, cmd *cobra.Command, c *client.Client, f *clientFlags, args []string) error {
			path := args[0]
			if _, err := os.Stat(path); err == nil && !force {
				return usageError("%s exists; give another name or --force to replace it", path)
			}
			snap, err := c.SaveSnapshot(ctx)
			if err != nil {
				return err
			}
			if err := writeFileAtomic(path, snap); err != nil {
				return err
			}
			return printSnapshotInfo(cmd.OutOrStdout(), f.json, path, snap)
		})
	cmd.Flags().BoolVar(&force, "force", false, "replace FILE if it exists")
	return cmd
}

// writeFileAtomic writes snap to path through a temporary file that is
// synced and renamed, so path is either the whole backup or untouched.
func writeFileAtomic(path string, snap *client.Snapshot) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = snap.WriteTo(tmp); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func newSnapshotInspectCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect FILE",
		Short: "Check a backup file's checksum and print what it holds",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			snap, err := readSnapshotFile(args[0])
			if err != nil {
				return err
			}
			return printSnapshotInfo(cmd.OutOrStdout(), asJSON, args[0], snap)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (tokens as decimal strings)")
	return cmd
}

// readSnapshotFile reads and verifies a backup file.
func readSnapshotFile(path string) (*client.Snapshot, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	snap, err := client.ReadSnapshot(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return snap, nil
}

func printSnapshotInfo(w io.Writer, asJSON bool, path string, snap *client.Snapshot) error {
	in := snap.Info
	saved := msTime(in.GetSavedAtUnixMs())
	if asJSON {
		return json.NewEncoder(w).Encode(map[string]any{
			"file": path, "issuer": in.GetIssuer(), "last_token": strconv.FormatUint(in.GetLastToken(), 10),
			"reserved_token": strconv.FormatUint(in.GetReservedToken(), 10), "index": strconv.FormatUint(in.GetIndex(), 10),
			"term": strconv.FormatUint(in.GetTerm(), 10), "saved_at": saved, "node": in.GetNode(),
			"format_version": in.GetFormatVersion(), "sessions": in.GetSessions(), "bytes": len(snap.State),
			"lineage": lineageJSON(in.GetLineage()),
		})
	}
	_, err := fmt.Fprintf(w, "%s: issuer %s, last token %d, reserved to %d, raft index %d (term %d), saved %s by %s, %d sessions, %d bytes, format %d\n",
		path, shown(in.GetIssuer()), in.GetLastToken(), in.GetReservedToken(), in.GetIndex(), in.GetTerm(), saved, shown(in.GetNode()), in.GetSessions(), len(snap.State), in.GetFormatVersion())
	if err != nil {
		return err
	}
	printLineage(w, in.GetLineage())
	return nil
}

// printLineage prints one line a restore, oldest first.
func printLineage(w io.Writer, restores []*fencedv1.IssuerEpoch) {
	for _, e := range restores {
		fmt.Fprintf(w, "  restored from %s (last token %d, reserved to %d, index %d, saved %s) as %s above token %d on %s\n",
			shown(e.GetIssuer()), e.GetLastToken(), e.GetReservedToken(), e.GetSnapshotIndex(), msTime(e.GetSavedAtUnixMs()),
			shown(e.GetNewIssuer()), e.GetTokenFloor(), msTime(e.GetRestoredAtUnixMs()))
	}
}

func lineageJSON(restores []*fencedv1.IssuerEpoch) []map[string]any {
	out := []map[string]any{}
	for _, e := range restores {
		out = append(out, map[string]any{
			"issuer": e.GetIssuer(), "last_token": strconv.FormatUint(e.GetLastToken(), 10),
			"reserved_token": strconv.FormatUint(e.GetReservedToken(), 10), "snapshot_index": strconv.FormatUint(e.GetSnapshotIndex(), 10),
			"saved_at": msTime(e.GetSavedAtUnixMs()), "token_floor": strconv.FormatUint(e.GetTokenFloor(), 10),
			"restored_at": msTime(e.GetRestoredAtUnixMs()), "new_issuer": e.GetNewIssuer(),
		})
	}
	return out
}

func msTime(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339) }

func newSnapshotRestoreCommand() *cobra.Command {
	def := server.DefaultConfig()
	var dataDir, nodeID, peerAddr string
	var floor, margin uint64
	cmd := &cobra.Command{
		Use:   "restore FILE --data-dir DIR (--token-floor N | --token-margin M)",
		Short: "Build the data dir of a new cluster from a backup, with a new issuer epoch and a token floor (offline)",
		Long: `Build DIR, which must not exist or be empty, as the data dir of a new
single-node cluster whose state is FILE's. Start it with fenced serve
--data-dir DIR and the same --node-id and --peer-listen; add members with
fenced serve --join and fenced cluster add.

The restored cluster must never issue a token that may exist: tokens the old
cluster handed out AFTER the save are in no backup. So the restore needs a
floor, and every token it issues is above it:

  --token-floor N   N at least the highest token any resource has accepted
                    (the guards' watermarks: max(token) of your fence tables,
                    the Redis watermark keys, ...) and at least the backup's
                    last token and reservation;
  --token-margin M  the floor is the backup's reservation (or last token)
                    plus M: M must exceed the grants the old cluster may
                    have issued after the save.

The new cluster is a new issuer epoch: issuer X becomes X.e2 (the lineage,
with the old issuer, its last token and the floor, is kept in the state).
Tokens of two epochs are not comparable: guards pinned to X refuse tokens of
X.e2 and say it is a restore; re-pin them. Sessions, grants, waiters and
signing keys of the old cluster are not restored (their holders talk to the
old issuer); the fenced kv is, with its watermarks.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if dataDir == "" {
				return usageError("--data-dir is required: the new data dir to build (it must not exist or be empty)")
			}
			floorSet, marginSet := cmd.Flags().Changed("token-floor"), cmd.Flags().Changed("token-margin")
			switch {
			case floorSet && marginSet:
				return usageError("--token-floor and --token-margin exclude each other")
			case !floorSet && !marginSet:
				return usageError("a restore needs --token-floor N or --token-margin M: tokens the old cluster issued after the save are in no backup, and the new cluster must issue none of them again. Give --token-floor the highest token any resource has accepted (the guards' watermarks), or --token-margin more than the grants issued since the save (see fenced snapshot restore --help)")
			}
			snap, err := readSnapshotFile(args[0])
			if err != nil {
				return err
			}
			in := snap.Info
			high := max(in.GetLastToken(), in.GetReservedToken())
			if marginSet {
				if margin == 0 || margin > uint64(fence.MaxToken)-high {
					return usageError("--token-margin %d: want 1 to %d (the floor, reservation %d plus the margin, must stay at most %d)", margin, uint64(fence.MaxToken)-high, high, uint64(fence.MaxToken))
				}
				floor = high + margin
			}
			if floor < high {
				return usageError("--token-floor %d is below the backup's last token %d or its reservation %d: the new cluster could issue tokens the old one handed out", floor, in.GetLastToken(), in.GetReservedToken())
			}
			state, issuer, err := fsm.Restored(snap.State, fsm.Reissue{
				Floor: fence.Token(floor), RestoredAtUnixMs: time.Now().UnixMilli(),
				SnapshotIndex: in.GetIndex(), SavedAtUnixMs: in.GetSavedAtUnixMs(),
			})
			if err != nil {
				if errors.Is(err, fence.ErrInvalidArgument) {
					return usageError("%s: %v", args[0], err)
				}
				return fmt.Errorf("%s: %w", args[0], err)
			}
			if err := raftstore.Seed(dataDir, nodeID, peerAddr, state); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), `restored %s into %s: issuer %s (restored from %s, last token %d), every token above %d
start it: fenced serve --data-dir %s --node-id %s --peer-listen %s
re-pin guards pinned to %s to %s: tokens of the two issuers are not comparable
`, args[0], dataDir, issuer, in.GetIssuer(), in.GetLastToken(), floor, dataDir, nodeID, peerAddr, in.GetIssuer(), issuer)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", "", "the new data dir to build (must not exist or be empty; required)")
	f.Uint64Var(&floor, "token-floor", 0, "every token of the restored cluster is above N: at least the highest token any resource has accepted and the backup's reservation")
	f.Uint64Var(&margin, "token-margin", 0, "derive the floor: the backup's reservation (or last token) plus M, more than the grants issued after the save")
	f.StringVar(&nodeID, "node-id", def.Raft.NodeID, "the restored node's id (fenced serve --node-id)")
	f.StringVar(&peerAddr, "peer-listen", def.Raft.PeerListen, "the restored node's Raft peer address (fenced serve --peer-listen)")
	return cmd
}
