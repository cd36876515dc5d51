package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fenced-dev/fenced/client"
)

func newKeysCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "List and rotate the cluster's grant-signing keys",
		Long: `The leader signs every grant it hands a holder with the cluster's Ed25519
key, so a resource can check offline that a token was granted for the
object it writes (guard.Signed; docs/signed-grants.md). The public keys are
served at GET /.well-known/fenced-keys on every member's API port.`,
	}
	var keep int
	var reason string
	rotate := clusterCommand("rotate --reason TEXT", "Sign new grants with a new key; keep the newest --keep keys published (admin)", exactArgs(0),
		func(ctx context.Context, cmd *cobra.Command, c *client.Client, f *clientFlags, args []string) error {
			if reason == "" {
				return usageError("--reason is empty: say why the keys are rotated (it is audited)")
			}
			k, dropped, err := c.RotateSigningKeys(ctx, keep, reason)
			if err != nil {
				return err
			}
			if f.json {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"key": k.ID, "created_at": k.CreatedAt, "dropped": dropped})
			}
			msg := fmt.Sprintf("new key %s signs new grants", k.ID)
			if len(dropped) > 0 {
				msg += fmt.Sprintf("; dropped %s (the grants they signed no longer verify)", strings.Join(dropped, ", "))
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), msg)
			return err
		})
	rotate.Flags().IntVar(&keep, "keep", 3, "keys to keep published, the new one included (1 to 16): a grant signed by a key verifies until keep-1 more rotations; 1 withdraws every earlier key at once (a key that leaked)")
	rotate.Flags().StringVar(&reason, "reason", "", "why the keys are rotated, for the audit log (required)")
	list := clusterCommand("list", "The published public keys, oldest first; the current one signs new grants", exactArgs(0),
		func(ctx context.Context, cmd *cobra.Command, c *client.Client, f *clientFlags, args []string) error {
			ks, err := c.SigningKeys(ctx)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if f.json {
				b, err := ks.MarshalJSON()
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(w, string(b))
				return err
			}
			fmt.Fprintf(w, "issuer %s\n", shown(ks.Issuer()))
			fmt.Fprintf(w, "%-16s %-24s %-7s %s\n", "ID", "CREATED", "CURRENT", "PUBLIC KEY (base64)")
			for _, k := range ks.Keys() {
				cur := ""
				if k.ID == ks.Current() {
					cur = "yes"
				}
				fmt.Fprintf(w, "%-16s %-24s %-7s %s\n", shown(k.ID), k.CreatedAt.UTC().Format("2006-01-02T15:04:05.000Z"), cur, base64.StdEncoding.EncodeToString(k.Key))
			}
			return nil
		})
	cmd.AddCommand(list, rotate)
	return cmd
}
