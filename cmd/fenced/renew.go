package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
)

func newRenewCommand() *cobra.Command {
	var cf clientFlags
	var session, secret string
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "renew NAME --session ID --secret S [--ttl D]",
		Short: "Renew a grant with a TTL of its own (from fenced acquire)",
		Long: `Renew the grant of lock NAME held by session ID, such as one printed by
"fenced acquire": the server keeps it for at least the TTL from now, and
--ttl D, when given, becomes its TTL (100ms to 24h; the default keeps the
TTL it has). The grant keeps its token; the renewed grant is printed. The
session's secret ("secret" in "fenced acquire --json") proves the renewal
comes from the grant's owner.

A session that does not hold the lock (its TTL ran out and someone else may
hold it now, or it was released) prints not_owned and changes nothing.

Exit status: 0 renewed; 1 not_owned, a wrong secret or a session that is
gone; 2 usage.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			id, err := strconv.ParseUint(session, 10, 64)
			if err != nil || id == 0 {
				return usageError("--session %q: want the session id printed by acquire (a positive integer)", session)
			}
			if secret == "" {
				return usageError("--secret is empty: want the session's secret printed by \"fenced acquire --json\" (or set FENCED_SESSION_SECRET)")
			}
			if err := fence.ValidateName(name); err != nil {
				return withExit(exitUsage, err)
			}
			if cmd.Flags().Changed("ttl") {
				if err := fence.ValidateTTL(ttl); err != nil {
					return withExit(exitUsage, fmt.Errorf("--ttl: %w", err))
				}
			}
			var g fence.Grant
			err = cf.withClient(cmd.Context(), func(ctx context.Context, c *client.Client) (err error) {
				g, err = c.Renew(ctx, name, id, secret, ttl)
				return err
			})
			if errors.Is(err, client.ErrNotOwned) {
				fmt.Fprintln(cmd.OutOrStdout(), "not_owned")
				return withExit(exitError, fmt.Errorf("%s: session %d does not hold it; nothing changed", name, id))
			}
			if err != nil {
				return classify(err)
			}
			if cf.json {
				return printGrant(cmd.OutOrStdout(), true, g, "")
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: renewed token %d (issuer %s, session %d, ttl %v)\n", shown(g.Name), g.Token, shown(g.Issuer), g.Session, g.TTL)
			return err
		},
	}
	cf.register(cmd)
	cmd.Flags().StringVar(&session, "session", os.Getenv("FENCED_SESSION"), "the session holding the grant (env FENCED_SESSION; required)")
	cmd.Flags().StringVar(&secret, "secret", os.Getenv("FENCED_SESSION_SECRET"), "the session's secret (env FENCED_SESSION_SECRET; required)")
	cmd.Flags().DurationVar(&ttl, "ttl", 0, "the grant's new TTL (100ms to 24h); unset: keep its TTL")
	return cmd
}
