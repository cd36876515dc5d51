package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fenced-dev/fenced/server"
)

func newAuthCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "auth",
		Short: "Make bearer tokens for a server's --auth-file",
		Args:  exactArgs(0),
	}
	cmd.AddCommand(newAuthTokenCommand())
	return cmd
}

func newAuthTokenCommand() *cobra.Command {
	var name, tokenOut string
	var roles []string
	cmd := &cobra.Command{
		Use:   "token --name NAME --role PREFIX=PERM[,PERM...] --token-out FILE",
		Short: "Create a random bearer token: the token goes to --token-out, its auth-file line to stdout",
		Long: `Create a random bearer token (32 random bytes, hexadecimal) for an identity.
The token is written to --token-out (mode 0600; an existing file is not
overwritten) for the client (--token-file, FENCED_TOKEN_FILE); the line for
the server's --auth-file, which holds only the token's SHA-256, is printed.
Each --role grants permissions (read, acquire, kv-write, admin) on the
names starting with PREFIX; "=admin" (an empty prefix) covers every name.
Append the line to the auth file and send the server SIGHUP.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			e := server.AuthEntry{Name: name}
			for _, r := range roles {
				i := strings.LastIndex(r, "=")
				if i < 0 {
					return usageError("--role %q: want PREFIX=PERM[,PERM...]", r)
				}
				e.Roles = append(e.Roles, server.AuthRole{Prefix: r[:i], Permissions: strings.Split(r[i+1:], ",")})
			}
			if tokenOut == "" {
				return usageError("--token-out is required: the token is written to a file, never printed")
			}
			var token string
			token, e.SHA256 = server.NewAuthToken()
			line, _ := json.Marshal(e)
			if err := server.CheckAuthLine(line); err != nil {
				return usageError("%v", err)
			}
			f, err := os.OpenFile(tokenOut, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				if errors.Is(err, os.ErrExist) {
					return usageError("--token-out %s exists; not overwriting a token", tokenOut)
				}
				return err
			}
			if _, err := fmt.Fprintln(f, token); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), string(line))
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "the identity's name (audit log, error messages)")
	cmd.Flags().StringArrayVar(&roles, "role", nil, "PREFIX=PERM[,PERM...]: grant permissions (read, acquire, kv-write, admin) on names starting with PREFIX; repeatable")
	cmd.Flags().StringVar(&tokenOut, "token-out", "", "write the token to this new file (mode 0600)")
	return cmd
}
