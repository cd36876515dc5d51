package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/fsm"
)

// version is the release, set at build time with
// -ldflags "-X main.version=v1.2.3"; empty takes the module version Go
// recorded in the binary ("(devel)" for a build from a checkout).
var version string

// commit is the source revision, set at build time with
// -ldflags "-X main.commit=SHA" where Go records none (a build without
// VCS stamping, as in deploy/Dockerfile).
var commit string

// buildInfo is what fenced version prints.
type buildInfo struct {
	Version   string `json:"version"`
	Module    string `json:"module"`
	Commit    string `json:"commit,omitempty"`
	CommitAt  string `json:"commit_time,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"go"`
	Platform  string `json:"platform"`
	// Formats is the replicated format versions this build applies and
	// the backup file version it reads (docs/operations.md, "Upgrades").
	FormatMin    uint32 `json:"format_min"`
	FormatMax    uint32 `json:"format_max"`
	SnapshotFile int    `json:"snapshot_file"`
}

func readBuildInfo() buildInfo {
	b := buildInfo{Version: version, Commit: commit, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
		FormatMin: fsm.MinFormatVersion, FormatMax: fsm.FormatVersion, SnapshotFile: client.SnapshotFileVersion}
	if bi, ok := debug.ReadBuildInfo(); ok {
		b.Module = bi.Main.Path
		if b.Version == "" {
			b.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if b.Commit == "" {
					b.Commit = s.Value
				}
			case "vcs.time":
				b.CommitAt = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	if b.Version == "" {
		b.Version = "unknown"
	}
	return b
}

func newVersionCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the release, commit, Go version and the replicated format versions this build applies",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			b := readBuildInfo()
			w := cmd.OutOrStdout()
			if asJSON {
				return json.NewEncoder(w).Encode(b)
			}
			rev := b.Commit
			if rev == "" {
				rev = "unknown"
			}
			if b.CommitAt != "" {
				rev += " " + b.CommitAt
			}
			if b.Modified {
				rev += " (modified)"
			}
			_, err := fmt.Fprintf(w, "fenced %s\nmodule %s\ncommit %s\ngo %s %s\nreplicated format %d to %d, snapshot file %d\n",
				b.Version, b.Module, rev, b.GoVersion, b.Platform, b.FormatMin, b.FormatMax, b.SnapshotFile)
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
