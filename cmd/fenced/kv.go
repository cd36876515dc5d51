package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
)

// Exit codes of the kv commands.
const (
	exitNotFound        = 3
	exitStale           = 5
	exitVersionMismatch = 6
	exitScopeMismatch   = 7
)

func newKVCommand() *cobra.Command {
	kv := &cobra.Command{
		Use:   "kv",
		Short: "Read and write the server's fenced key-value store",
		Long: `The server's fenced key-value store: every write carries the token of a
grant and is rejected when the token is below the highest the key has
accepted (exit 5, with the required token on stderr), and when the token is
not held by a grant in force whose scope covers the key (exit 7, naming the
scope the token belongs to): the lock "orders" writes "orders" and
"orders/17", never "orders2"; a released or expired holder's token writes
nothing. The server's --kv-scope PREFIX=SCOPE maps keys to another scope.

Exit status: 0 done; 3 key not found (get); 5 stale token; 6 version
mismatch (--if-version); 7 scope mismatch; 2 usage; 1 other error.`,
	}
	kv.AddCommand(newKVPutCommand(), newKVGetCommand(), newKVDelCommand())
	return kv
}

// kvWriteFlags are the flags of put and del.
type kvWriteFlags struct {
	clientFlags
	token     string
	ifVersion int64
}

func (f *kvWriteFlags) register(cmd *cobra.Command) {
	f.clientFlags.register(cmd)
	cmd.Flags().StringVar(&f.token, "token", os.Getenv("FENCED_TOKEN"), "the fencing token of your grant (env FENCED_TOKEN)")
	cmd.Flags().Int64Var(&f.ifVersion, "if-version", -1, "write only if the key's version is this (0: the key must not exist)")
}

func (f *kvWriteFlags) parse() (fence.Token, []client.KVOption, error) {
	if f.token == "" {
		return 0, nil, usageError("no token: pass --token or set FENCED_TOKEN (fenced lock sets it for CMD)")
	}
	tok, err := fence.ParseToken(f.token)
	if err != nil {
		return 0, nil, withExit(exitUsage, err)
	}
	var opts []client.KVOption
	if f.ifVersion >= 0 {
		opts = append(opts, client.IfVersion(uint64(f.ifVersion)))
	}
	if issuer := os.Getenv("FENCED_ISSUER"); issuer != "" {
		opts = append(opts, client.WithIssuer(issuer))
	}
	return tok, opts, nil
}

// kvExit gives kv refusals their exit codes.
func kvExit(err error) error {
	var se *fence.StaleTokenError
	var vm *fence.VersionMismatchError
	var sm *fence.ScopeMismatchError
	switch {
	case errors.As(err, &se):
		return withExit(exitStale, err)
	case errors.As(err, &sm):
		return withExit(exitScopeMismatch, err)
	case errors.As(err, &vm):
		return withExit(exitVersionMismatch, err)
	case errors.Is(err, client.ErrKeyNotFound):
		return withExit(exitNotFound, err)
	}
	return classify(err)
}

func newKVPutCommand() *cobra.Command {
	var f kvWriteFlags
	var file string
	cmd := &cobra.Command{
		Use:   "put KEY [VALUE]",
		Short: "Store a value under your token (VALUE, --file F, or standard input)",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return usageError("usage: fenced kv put KEY [VALUE] [--file F] --token T")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			tok, opts, err := f.parse()
			if err != nil {
				return err
			}
			var value []byte
			switch {
			case len(args) == 2 && file != "":
				return usageError("give the value as an argument or with --file, not both")
			case len(args) == 2:
				value = []byte(args[1])
			case file != "":
				if value, err = os.ReadFile(file); err != nil {
					return err
				}
			default:
				if value, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), 1<<20+1)); err != nil {
					return err
				}
			}
			var version uint64
			err = f.withClient(cmd.Context(), func(ctx context.Context, c *client.Client) (err error) {
				version, err = c.KVPut(ctx, args[0], value, tok, opts...)
				return err
			})
			if err != nil {
				return kvExit(err)
			}
			if f.json {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]string{"key": args[0], "version": strconv.FormatUint(version, 10), "token": tok.String()})
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: stored, version %d (token %d)\n", args[0], version, tok)
			return err
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&file, "file", "", "read the value from this file")
	return cmd
}

func newKVGetCommand() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{
		Use:   "get KEY",
		Short: "Print a key's value (with --json: value, version and token)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var e client.KVEntry
			err := f.withClient(cmd.Context(), func(ctx context.Context, c *client.Client) (err error) {
				e, err = c.KVGet(ctx, args[0])
				return err
			})
			if err != nil {
				return kvExit(err)
			}
			if f.json {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{
					"key": args[0], "value": string(e.Value), "version": strconv.FormatUint(e.Version, 10), "token": e.Token.String(),
				})
			}
			_, err = cmd.OutOrStdout().Write(e.Value)
			return err
		},
	}
	f.register(cmd)
	return cmd
}

func newKVDelCommand() *cobra.Command {
	var f kvWriteFlags
	cmd := &cobra.Command{
		Use:   "del KEY",
		Short: "Delete a key under your token (its watermark stays)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tok, opts, err := f.parse()
			if err != nil {
				return err
			}
			var deleted bool
			err = f.withClient(cmd.Context(), func(ctx context.Context, c *client.Client) (err error) {
				deleted, err = c.KVDelete(ctx, args[0], tok, opts...)
				return err
			})
			if err != nil {
				return kvExit(err)
			}
			if f.json {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"key": args[0], "deleted": deleted})
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: deleted=%v\n", args[0], deleted)
			return err
		},
	}
	f.register(cmd)
	return cmd
}
