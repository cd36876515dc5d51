package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// lockDelayFlag is --lock-delay of the commands that take a lock
// (docs/lock-delay.md). Unset, the server's default applies.
type lockDelayFlag struct {
	d   time.Duration
	cmd *cobra.Command
}

func (f *lockDelayFlag) register(cmd *cobra.Command) {
	f.cmd = cmd
	cmd.Flags().DurationVar(&f.d, "lock-delay", 0, "after this grant's session expires or is revoked (not after a release), grant the lock to no one for this long (0 to 1m; unset: the server's --lock-delay). A mitigation for resources that cannot check tokens, not a safety mechanism")
}

// options returns the lock options of the flag, or a usage error.
func (f *lockDelayFlag) options() ([]client.LockOption, error) {
	if !f.cmd.Flags().Changed("lock-delay") {
		return nil, nil
	}
	if err := fence.ValidateLockDelay(f.d); err != nil {
		return nil, withExit(exitUsage, fmt.Errorf("--lock-delay: %w", err))
	}
	return []client.LockOption{client.WithLockDelay(f.d)}, nil
}

// delayNote describes the lock delay of l for fenced status: the pending
// delay of a free lock, or the delay its holder asked for.
func delayNote(l *fencedv1.LockInfo) string {
	switch {
	case l.Delayed:
		return fmt.Sprintf("; in its lock delay of %v (until %s at the earliest)", time.Duration(l.DelayMs)*time.Millisecond,
			time.UnixMilli(l.DelayUntilUnixMs).UTC().Format(time.RFC3339))
	case l.LockDelayMs > 0:
		return fmt.Sprintf("; lock delay %v", time.Duration(l.LockDelayMs)*time.Millisecond)
	}
	return ""
}
