package main

import (
	"strings"

	"github.com/spf13/cobra"
)

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "fenced",
		Short:         "fenced: locks whose fencing tokens the protected resource can check",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError("%v (see %s --help)", err, c.CommandPath())
	})
	root.AddCommand(newServeCommand(), newAcquireCommand(), newReleaseCommand(), newLockCommand(), newStatusCommand(), newKVCommand(), newClusterCommand(), newCheckCommand(), newBenchCommand())
	return root
}

// isUsage reports errors cobra raises for unknown commands or bad arguments.
func isUsage(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "unknown command") || strings.Contains(msg, "arg(s)") || strings.HasPrefix(msg, "unknown flag")
}
