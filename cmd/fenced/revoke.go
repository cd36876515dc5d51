package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
)

func newRevokeCommand() *cobra.Command {
	var cf clientFlags
	var reason string
	var token uint64
	cmd := &cobra.Command{
		Use:   "revoke NAME --reason TEXT",
		Short: "Force-revoke a lock: end the session that holds it",
		Long: `Force-revoke a lock held by a stuck or runaway holder. The server ends
the session holding it, as if it had expired: every lock and wait of that
session ends, its SDK is told at once (the contexts of its grants are
cancelled), and the lock goes to its first waiter with a higher token. The
revoked grant is printed; the server logs the revocation at WARN with the
reason and the caller's address.

Without --token, the current holder's token is read first and only that
grant is revoked, so a retry never revokes the next holder.

A server with --auth-file takes it from identities with the admin
permission on the name (--token-file). Without an auth file the server
refuses it unless it was started with --allow-revoke, and then anyone who
can reach its API may revoke.

Exit status: 0 revoked, 3 nothing to revoke (the lock is free or held under
another token), 2 usage, 1 other error.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := fence.ValidateName(name); err != nil {
				return withExit(exitUsage, err)
			}
			if reason == "" {
				return usageError("--reason is empty: say why the lock is revoked (it is logged)")
			}
			var g fence.Grant
			var revoked bool
			err := cf.withClient(cmd.Context(), func(ctx context.Context, c *client.Client) (err error) {
				g, revoked, err = c.Revoke(ctx, name, fence.Token(token), reason)
				return err
			})
			if err != nil {
				return classify(err)
			}
			if !revoked {
				return withExit(exitNotGranted, fmt.Errorf("%s: nothing to revoke (the lock is free or held under another token)", name))
			}
			if !cf.json {
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: revoked token %d (session %d ended)\n", g.Name, g.Token, g.Session)
				return err
			}
			return printGrant(cmd.OutOrStdout(), true, g, "")
		},
	}
	cf.register(cmd)
	cmd.Flags().StringVar(&reason, "reason", "", "why the lock is revoked, for the server's log (required)")
	cmd.Flags().Uint64Var(&token, "token", 0, "revoke only the grant with this token (default: the current one)")
	return cmd
}
