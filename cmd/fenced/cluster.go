package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/fenced-dev/fenced/client"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

func newClusterCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Show and change the cluster's membership and leadership",
	}
	cmd.AddCommand(
		clusterCommand("status", "Members, roles, leader, term, commit index, last token, per-node lag (waits up to 3s for members that have just started)", exactArgs(0),
			func(ctx context.Context, cmd *cobra.Command, c *client.Client, f *clientFlags, args []string) error {
				st, err := c.ClusterStatus(ctx)
				// A member that has just started registers its API address
				// with the leader within a moment; until then it shows as
				// unreachable. Give it that moment.
				for wait := time.Now().Add(registerWait); err == nil && !allRegistered(st) && time.Now().Before(wait); {
					select {
					case <-ctx.Done():
						return ctx.Err()
					case <-time.After(100 * time.Millisecond):
					}
					st, err = c.ClusterStatus(ctx)
				}
				if err != nil {
					return err
				}
				if f.json {
					b, err := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(st)
					if err != nil {
						return err
					}
					_, err = fmt.Fprintln(cmd.OutOrStdout(), string(b))
					return err
				}
				w := cmd.OutOrStdout()
				fmt.Fprintf(w, "leader %s, term %d, commit index %d, last token %d\n", shown(st.Leader), st.Term, st.CommitIndex, st.LastToken)
				fmt.Fprintf(w, "%-10s %-11s %-22s %-22s %-8s %s\n", "ID", "ROLE", "PEER", "API", "APPLIED", "LAG")
				for _, m := range st.Members {
					fmt.Fprintf(w, "%-10s %-11s %-22s %-22s %-8d %d\n", shown(m.Id), m.Role, shown(m.PeerAddr), shown(m.ApiAddr), m.AppliedIndex, m.Lag)
				}
				return nil
			}),
		clusterCommand("add ID PEER-ADDR", "Add a voter (start it first: fenced serve --join --node-id ID --peer-listen PEER-ADDR)", exactArgs(2),
			func(ctx context.Context, cmd *cobra.Command, c *client.Client, f *clientFlags, args []string) error {
				if err := c.AddMember(ctx, args[0], args[1]); err != nil {
					return err
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "added %s at %s\n", args[0], args[1])
				return err
			}),
		clusterCommand("remove ID", "Remove a member (never the last voter)", exactArgs(1),
			func(ctx context.Context, cmd *cobra.Command, c *client.Client, f *clientFlags, args []string) error {
				if err := c.RemoveMember(ctx, args[0]); err != nil {
					return err
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", args[0])
				return err
			}),
		clusterCommand("transfer-leader [ID]", "Hand leadership to member ID, or to any other member", cobra.MaximumNArgs(1),
			func(ctx context.Context, cmd *cobra.Command, c *client.Client, f *clientFlags, args []string) error {
				id := ""
				if len(args) == 1 {
					id = args[0]
				}
				leader, err := c.TransferLeader(ctx, id)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "leader is %s\n", shown(leader))
				return err
			}),
	)
	return cmd
}

// clientRun is the body of a client command that needs only a connected
// client and a bounded context.
type clientRun func(ctx context.Context, cmd *cobra.Command, c *client.Client, f *clientFlags, args []string) error

// clusterCommand builds a client command around run: it connects, bounds
// the call by --timeout and maps errors to exit codes.
func clusterCommand(use, short string, args cobra.PositionalArgs, run clientRun) *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  args,
		RunE: func(cmd *cobra.Command, args []string) error {
			return classify(f.withClient(cmd.Context(), func(ctx context.Context, c *client.Client) error {
				return run(ctx, cmd, c, &f, args)
			}))
		},
	}
	f.register(cmd)
	return cmd
}

// registerWait is how long cluster status waits for members that have not
// registered their API address yet.
const registerWait = 3 * time.Second

// allRegistered reports whether every member has an API address.
func allRegistered(st *fencedv1.ClusterStatusResponse) bool {
	for _, m := range st.Members {
		if m.ApiAddr == "" {
			return false
		}
	}
	return true
}
