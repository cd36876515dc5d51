//go:build !linux

package raftstore

import (
	"github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/types"
)

// newSegmentFS returns raft-wal's own files: writing zeros ahead of the
// log and syncing with fdatasync (walfiles_linux.go) are built for Linux
// only.
func newSegmentFS() types.VFS { return fs.New() }
