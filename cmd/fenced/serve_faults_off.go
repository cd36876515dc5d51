//go:build !fencedfaults

package main

import (
	"os"

	"github.com/spf13/pflag"

	"github.com/fenced-dev/fenced/server"
)

// addFaultFlags registers nothing: a production build has no fault flags.
func addFaultFlags(*pflag.FlagSet, *server.Config) {}

// applyFaultEnv refuses dialViaEnv: the dial hook exists only in a test
// build, and ignoring the variable would leave a test's links uncut.
func applyFaultEnv(*server.Config) error {
	if os.Getenv(dialViaEnv) != "" {
		return usageError("%s is set, but this fenced is not a test build; build one with: go build -tags fencedfaults ./cmd/fenced", dialViaEnv)
	}
	return nil
}
