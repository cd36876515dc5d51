package main

import (
	"errors"

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
	root.AddCommand(
		newServeCommand(),
		newAcquireCommand(),
		newReleaseCommand(),
		newRenewCommand(),
		newRevokeCommand(),
		newLockCommand(),
		newElectCommand(),
		newObserveCommand(),
		newStatusCommand(),
		newKVCommand(),
		newClusterCommand(),
		newCheckCommand(),
		newBenchCommand(),
		newCertsCommand(),
		newAuthCommand(),
		newKeysCommand(),
		newSemaphoreCommand(),
		newRWLockCommand(),
		newSnapshotCommand(),
		newVersionCommand(),
		newQueueCommand(),
		newWorkCommand(),
		newLatchCommand(),
		newLimiterCommand(),
		newManCommand(),
	)
	root.InitDefaultCompletionCmd() // now, so that usageArgs covers it
	usageArgs(root)
	return root
}

// usageArgs gives the errors of every argument check in the tree under c
// (cobra.NoArgs, cobra.MaximumNArgs and the like) the usage exit code.
func usageArgs(c *cobra.Command) {
	if c.HasParent() && c.HasSubCommands() && !c.Runnable() {
		// A group such as "fenced cluster": cobra would print its help
		// and exit 0 for a subcommand it does not have.
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError("unknown command %q for %q (see %s --help)", args[0], cmd.CommandPath(), cmd.CommandPath())
			}
			return cmd.Help()
		}
	}
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			err := check(cmd, args)
			var ec *exitCodeError
			if err == nil || errors.As(err, &ec) {
				return err
			}
			return withExit(exitUsage, err)
		}
	}
	for _, sub := range c.Commands() {
		usageArgs(sub)
	}
}

// isUsage reports whether err, which executing the command line ended in
// at command c, is about the command line. Flag and argument errors carry
// the usage exit code already; an error cobra reports at the root command,
// which runs nothing itself, can only be an unknown command.
func isUsage(c *cobra.Command, err error) bool {
	return err != nil && !c.HasParent()
}
