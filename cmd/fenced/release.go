package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/fenced-dev/fenced/client"
)

func newReleaseCommand() *cobra.Command {
	var cf clientFlags
	var session, secret string
	cmd := &cobra.Command{
		Use:   "release NAME --session ID --secret S",
		Short: "Release a lock held by a session",
		Long: `Release a lock held by a session and print the result: released,
already_released (the lock was free) or not_owned (another session holds it;
nothing changed). The session's secret ("secret" in the output of
"fenced acquire --json"; FENCED_SESSION_SECRET in a "fenced lock" command)
proves the release comes from the session's owner: without it the server
refuses the release and nothing changes. Exit status 0, except 1 for
not_owned and for a refused release.`,
		Args: exactArgs(1),
		RunE: runRelease(&cf, &session, &secret, "fenced acquire --json", func(ctx context.Context, c *client.Client, name string, id uint64, secret string) (client.ReleaseResult, error) {
			return c.Release(ctx, name, id, secret)
		}),
	}
	cf.register(cmd)
	cmd.Flags().StringVar(&session, "session", os.Getenv("FENCED_SESSION"), "the session holding the lock (env FENCED_SESSION; required)")
	cmd.Flags().StringVar(&secret, "secret", os.Getenv("FENCED_SESSION_SECRET"), "the session's secret (env FENCED_SESSION_SECRET; required)")
	return cmd
}

// runRelease is the RunE of a release command (fenced release, fenced
// semaphore release): it checks --session and --secret, releases with
// release and prints the result; not_owned exits 1. acquireCmd names the
// command whose output holds the secret, for the usage error.
func runRelease(cf *clientFlags, session, secret *string, acquireCmd string, release func(ctx context.Context, c *client.Client, name string, id uint64, secret string) (client.ReleaseResult, error)) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		id, err := strconv.ParseUint(*session, 10, 64)
		if err != nil || id == 0 {
			return usageError("--session %q: want the session id printed by acquire (a positive integer)", *session)
		}
		if *secret == "" {
			return usageError("--secret is empty: want the session's secret printed by %q (or set FENCED_SESSION_SECRET)", acquireCmd)
		}
		var res client.ReleaseResult
		err = cf.withClient(cmd.Context(), func(ctx context.Context, c *client.Client) (err error) {
			res, err = release(ctx, c, args[0], id, *secret)
			return err
		})
		if err != nil {
			return classify(err)
		}
		if cf.json {
			err = json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]string{"result": string(res)})
		} else {
			_, err = fmt.Fprintln(cmd.OutOrStdout(), res)
		}
		if err == nil && res == client.NotOwned {
			return withExit(exitError, nil)
		}
		return err
	}
}
