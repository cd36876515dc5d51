//go:build !linux

package raftstore

import "time"

// clockStart anchors leaseClock.
var clockStart = time.Now()

// leaseClock returns the time on Go's monotonic clock since the process
// started. Whether it counts a suspend of the machine depends on the
// system (see docs/cluster.md, "Lease reads").
func leaseClock() time.Duration { return time.Since(clockStart) }
