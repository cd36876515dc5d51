package raftstore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/raftstore"
)

func TestConfig_Validate(t *testing.T) {
	if err := raftstore.DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v, want nil", err)
	}

	tests := []struct {
		name   string
		modify func(c *raftstore.Config)
		want   string // substring of the error
	}{
		{"empty node id", func(c *raftstore.Config) { c.NodeID = "" }, "node id is empty"},
		{"node id with space", func(c *raftstore.Config) { c.NodeID = "n 1" }, "spaces or control characters"},
		{"long node id", func(c *raftstore.Config) { c.NodeID = strings.Repeat("n", 129) }, "want at most 128"},
		{"empty data dir", func(c *raftstore.Config) { c.DataDir = "" }, "data dir is empty"},
		{"empty peer address", func(c *raftstore.Config) { c.PeerListen = "" }, "peer listen address is empty"},
		{"peer address without port", func(c *raftstore.Config) { c.PeerListen = "127.0.0.1" }, "is not host:port"},
		{"peer address without host", func(c *raftstore.Config) { c.PeerListen = ":7701" }, "has no host"},
		{"wildcard peer address", func(c *raftstore.Config) { c.PeerListen = "0.0.0.0:7701" }, "is a wildcard"},
		{"bad port", func(c *raftstore.Config) { c.PeerListen = "127.0.0.1:70000" }, "want a number from 0 to 65535"},
		{"zero heartbeat", func(c *raftstore.Config) { c.HeartbeatTimeout = 0 }, "heartbeat timeout is 0s; want at least 5ms"},
		{"huge election timeout", func(c *raftstore.Config) { c.ElectionTimeout = 1 << 62 }, "want at most 10m0s"},
		{"node id with a bidi control", func(c *raftstore.Config) { c.NodeID = "n\u202e1" }, "U+202E"},
		{"election below heartbeat", func(c *raftstore.Config) { c.ElectionTimeout = 100 * time.Millisecond }, "election timeout 100ms is shorter than heartbeat timeout 500ms"},
		{"lease above heartbeat", func(c *raftstore.Config) { c.LeaderLeaseTimeout = time.Second }, "leader lease timeout 1s is longer than heartbeat timeout 500ms"},
		{"zero commit timeout", func(c *raftstore.Config) { c.CommitTimeout = 0 }, "commit timeout is 0s"},
		{"zero snapshot threshold", func(c *raftstore.Config) { c.SnapshotThreshold = 0 }, "snapshot threshold is 0"},
		{"zero snapshot retain", func(c *raftstore.Config) { c.SnapshotRetain = 0 }, "snapshot retain is 0"},
		{"negative log cache", func(c *raftstore.Config) { c.LogCacheEntries = -1 }, "log cache is -1 entries; want 0 (off) to 65536"},
		{"huge log cache", func(c *raftstore.Config) { c.LogCacheEntries = 1 << 20 }, "log cache is 1048576 entries"},
		{"negative entries in flight", func(c *raftstore.Config) { c.MaxEntriesInFlight = -1 }, "max entries in flight is -1; want 0 (no limit) or more"},
		{"negative shutdown timeout", func(c *raftstore.Config) { c.ShutdownTimeout = -time.Second }, "shutdown timeout is -1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := raftstore.DefaultConfig()
			tt.modify(&c)
			err := c.Validate()
			if err == nil {
				t.Fatalf("Validate() = nil, want an error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate() = %q, want it to contain %q", err, tt.want)
			}
			if _, err := raftstore.Open(c, nil); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Open() = %v, want the Validate error", err)
			}
		})
	}

	t.Run("all problems at once", func(t *testing.T) {
		err := raftstore.Config{}.Validate()
		if err == nil {
			t.Fatal("Config{}.Validate() = nil, want an error")
		}
		for _, want := range []string{"node id is empty", "data dir is empty", "peer listen address is empty", "snapshot retain is 0"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Config{}.Validate() = %q, want it to contain %q", err, want)
			}
		}
	})
}
