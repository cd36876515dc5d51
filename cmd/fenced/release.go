package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/fenced-dev/fenced/client"
)

func newReleaseCommand() *cobra.Command {
	var cf clientFlags
	var session string
	cmd := &cobra.Command{
		Use:   "release NAME --session ID",
		Short: "Release a lock held by a session",
		Long: `Release a lock held by a session and print the result: released,
already_released (the lock was free) or not_owned (another session holds it;
nothing changed). Exit status 0, except 1 for not_owned.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseUint(session, 10, 64)
			if err != nil || id == 0 {
				return usageError("--session %q: want the session id printed by acquire (a positive integer)", session)
			}
			var res client.ReleaseResult
			err = cf.withClient(cmd.Context(), func(ctx context.Context, c *client.Client) (err error) {
				res, err = c.Release(ctx, args[0], id)
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
		},
	}
	cf.register(cmd)
	cmd.Flags().StringVar(&session, "session", "", "the session holding the lock (required)")
	cmd.MarkFlagRequired("session")
	return cmd
}
