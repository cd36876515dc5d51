package raftstore

import (
	"time"

	"golang.org/x/sys/unix"
)

// leaseClock returns the time on Linux's boot-time clock (CLOCK_BOOTTIME):
// monotonic like CLOCK_MONOTONIC, which Go's time.Now uses, but it also
// counts the time the machine spent suspended, so a leader lease measured
// on it runs out across a suspend too. Clock rate changes (NTP slewing)
// apply to it as to CLOCK_MONOTONIC; steps of the wall clock do not.
func leaseClock() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		// Linux has had CLOCK_BOOTTIME since 2.6.39.
		panic("raftstore: read CLOCK_BOOTTIME: " + err.Error())
	}
	return time.Duration(ts.Nano())
}
