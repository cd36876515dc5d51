package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/fenced-dev/fenced/internal/tlsfiles"
)

// defaultCertsDir is where `fenced certs` keeps the CA and the
// certificates it issues unless --dir says otherwise.
const defaultCertsDir = "./fenced-certs"

func newCertsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Create a CA and node or client certificates for TLS (a quick secure start)",
		Long: `Create a small certificate authority and the certificates a secure cluster
needs: one node certificate per member (its common name is the node id; it
serves the API and the peer port and dials peers) and client certificates
for applications. The CA key stays in the directory: keep it private, and
use your own PKI instead when you have one.`,
		Args: exactArgs(0),
	}
	cmd.AddCommand(newCertsInitCommand(), newCertsIssueCommand())
	return cmd
}

func newCertsInitCommand() *cobra.Command {
	var dir string
	var validity time.Duration
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Create a CA (ca.crt, ca.key) in --dir",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if validity <= 0 {
				return usageError("--validity %v must be positive", validity)
			}
			path, err := tlsfiles.InitCA(dir, validity)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created CA %s (key %s, valid until %s)\n", path, filepath.Join(dir, tlsfiles.CAKeyFile), time.Now().Add(validity).UTC().Format(time.DateOnly))
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", defaultCertsDir, "directory for the CA and the certificates it issues")
	cmd.Flags().DurationVar(&validity, "validity", 10*365*24*time.Hour, "how long the CA is valid")
	return cmd
}

func newCertsIssueCommand() *cobra.Command {
	var dir, node, clientName string
	var hosts []string
	var validity time.Duration
	cmd := &cobra.Command{
		Use:   "issue (--node ID [--host H]... | --client NAME)",
		Short: "Issue a node or client certificate signed by the CA in --dir",
		Long: `Issue a certificate signed by the CA in --dir, as NAME.crt and NAME.key.

--node ID issues a node certificate for the member with that node id: it is
valid for server and client use, and names localhost, 127.0.0.1, ::1 and
every --host (host name or IP address clients reach the node's API at).
--client NAME issues a client certificate (client use only: the peer port
refuses it).`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (node == "") == (clientName == "") {
				return usageError("give exactly one of --node ID and --client NAME")
			}
			if validity <= 0 {
				return usageError("--validity %v must be positive", validity)
			}
			kind, name, what := tlsfiles.Node, node, "node"
			if clientName != "" {
				if len(hosts) > 0 {
					return usageError("--host applies to --node certificates only")
				}
				kind, name, what = tlsfiles.Client, clientName, "client"
			}
			certPath, keyPath, err := tlsfiles.Issue(dir, kind, name, hosts, validity)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "issued %s certificate %s (key %s) for %q\n", what, certPath, keyPath, name)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", defaultCertsDir, "directory of the CA (fenced certs init)")
	f.StringVar(&node, "node", "", "issue a node certificate for this node id")
	f.StringVar(&clientName, "client", "", "issue a client certificate with this name")
	f.StringSliceVar(&hosts, "host", nil, "host name or IP the node is reached at (repeatable; localhost and loopback are always included)")
	f.DurationVar(&validity, "validity", 365*24*time.Hour, "how long the certificate is valid")
	return cmd
}
