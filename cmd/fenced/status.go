package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/fenced-dev/fenced/client"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

func newStatusCommand() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "status [NAME]",
		Short: "Show holders, tokens, waiters and sessions",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageError("status takes at most one lock name, got %d", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			var st *fencedv1.StatusResponse
			err := cf.withClient(cmd.Context(), func(ctx context.Context, c *client.Client) (err error) {
				st, err = c.Status(ctx, name)
				return err
			})
			if err != nil {
				return classify(err)
			}
			if cf.json {
				b, err := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(st)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(cmd.OutOrStdout(), string(b))
				return err
			}
			return printStatus(cmd.OutOrStdout(), st)
		},
	}
	cf.register(cmd)
	return cmd
}

func printStatus(w io.Writer, st *fencedv1.StatusResponse) error {
	fmt.Fprintf(w, "node %s (leader %s, term %d, applied %d)\nissuer %s, last token %d\n",
		shown(st.NodeId), shown(st.Leader), st.Term, st.AppliedIndex, shown(st.Issuer), st.LastToken)
	fmt.Fprintf(w, "\nlocks (%d%s):\n", len(st.Locks), hiddenNote(st.HiddenLocks))
	for _, l := range st.Locks {
		holder := "free"
		if h := l.Holder; h != nil {
			holder = fmt.Sprintf("token %d, session %d, since %s", h.Token, h.Session, time.UnixMilli(h.IssuedAtUnixMs).UTC().Format(time.RFC3339))
		}
		var waiters []string
		for _, wt := range l.Waiters {
			waiters = append(waiters, fmt.Sprint(wt.Session))
		}
		fmt.Fprintf(w, "  %-30s %s%s", shown(l.Name), holder, delayNote(l))
		if more := int(l.WaiterCount) - len(waiters); more > 0 {
			waiters = append(waiters, fmt.Sprintf("and %d more", more))
		}
		if len(waiters) > 0 {
			fmt.Fprintf(w, "; waiting: %s", strings.Join(waiters, ", "))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\nsessions (%d%s):\n", len(st.Sessions), hiddenNote(st.HiddenSessions))
	for _, s := range st.Sessions {
		held, waiting := shownBindings(s)
		fmt.Fprintf(w, "  %-8d ttl %-8v holds %v waits %v\n", s.Session, time.Duration(s.TtlMs)*time.Millisecond, held, waiting)
	}
	return nil
}

// shownBindings lists what a session holds and waits for: lock names,
// then the other primitives' objects as "PRIMITIVE:NAME", each shown safely.
func shownBindings(s *fencedv1.SessionInfo) (held, waiting []string) {
	held, waiting = shownAll(s.Held), shownAll(s.Waiting)
	for _, b := range s.Others {
		n := shown(b.Primitive + ":" + b.Name)
		if b.Waiting {
			waiting = append(waiting, n)
		} else {
			held = append(held, n)
		}
	}
	return held, waiting
}

// hiddenNote says how many items the server left out because the caller
// may not read them.
func hiddenNote(n uint32) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", %d more hidden: no read permission", n)
}
