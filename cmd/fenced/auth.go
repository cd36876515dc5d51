package main

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fenced-dev/fenced/internal/tlsfiles"
	"github.com/fenced-dev/fenced/server"
)

func newAuthCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "auth",
		Short: "Make bearer tokens and certificate identities for a server's --auth-file",
		Args:  exactArgs(0),
	}
	cmd.AddCommand(newAuthTokenCommand(), newAuthCertCommand())
	return cmd
}

// parseRoles parses --role PREFIX=PERM[,PERM...] flags.
func parseRoles(roles []string) ([]server.AuthRole, error) {
	var out []server.AuthRole
	for _, r := range roles {
		i := strings.LastIndex(r, "=")
		if i < 0 {
			return nil, usageError("--role %q: want PREFIX=PERM[,PERM...]", r)
		}
		out = append(out, server.AuthRole{Prefix: r[:i], Permissions: strings.Split(r[i+1:], ",")})
	}
	return out, nil
}

// rolesHelp is the help of both auth commands' --role flag.
const rolesHelp = "PREFIX=PERM[,PERM...]: grant permissions (read, acquire, kv-write, admin) on names starting with PREFIX; repeatable"

func newAuthCertCommand() *cobra.Command {
	var name, certFile, id string
	var roles []string
	cmd := &cobra.Command{
		Use:   "cert --name NAME (--cert FILE | --identity ID) --role PREFIX=PERM[,PERM...]",
		Short: "Print the auth-file line that makes a client certificate an identity",
		Long: `Print the line for the server's --auth-file that gives a client certificate
an identity and roles. The certificate's identity is its common name, or,
for a certificate without one, its one URI subject alternative name
(spiffe://example.org/app, say); --cert reads it from the certificate
file, --identity gives it directly. The server verifies the certificate
against its --ca in the TLS handshake; the line only says what it may do.
Each --role grants permissions (read, acquire, kv-write, admin) on the
names starting with PREFIX; "=admin" (an empty prefix) covers every name.
Append the line to the auth file and send the server SIGHUP.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			e := server.AuthEntry{Name: name, Cert: id}
			var err error
			if e.Roles, err = parseRoles(roles); err != nil {
				return err
			}
			switch {
			case (certFile == "") == (id == ""):
				return usageError("give --cert FILE or --identity ID (one of them)")
			case certFile != "":
				if e.Cert, err = certFileIdentity(certFile); err != nil {
					return usageError("--cert %s: %v", certFile, err)
				}
			}
			line, _ := json.Marshal(e)
			if err := server.CheckAuthLine(line); err != nil {
				return usageError("%v", err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), string(line))
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "the identity's name (audit log, error messages)")
	cmd.Flags().StringVar(&certFile, "cert", "", "the client certificate (PEM) whose identity this is")
	cmd.Flags().StringVar(&id, "identity", "", "the certificate identity itself: a common name, or the URI of a certificate without one")
	cmd.Flags().StringArrayVar(&roles, "role", nil, rolesHelp)
	return cmd
}

// certFileIdentity reads the first certificate of a PEM file and returns
// the identity it names (tlsfiles.ClientIdentity).
func certFileIdentity(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return "", errors.New("no PEM certificate in the file")
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return "", err
	}
	return tlsfiles.ClientIdentity(leaf)
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
			var err error
			if e.Roles, err = parseRoles(roles); err != nil {
				return err
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
	cmd.Flags().StringArrayVar(&roles, "role", nil, rolesHelp)
	cmd.Flags().StringVar(&tokenOut, "token-out", "", "write the token to this new file (mode 0600)")
	return cmd
}
