package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
)

func newRWLockCommand() *cobra.Command {
	rw := &cobra.Command{
		Use:   "rwlock",
		Short: "Run CMD under a read or write grant of a fair read/write lock, or describe one",
		Long: `A fair read/write lock: readers share it, a writer holds it alone, and
requests of both modes wait in one FIFO queue, so a waiting writer holds
back every reader that asks after it (no writer starvation). Every grant
has its own fencing token. There is no upgrade from read to write: release
the read grant and ask for the write grant.

A read/write lock is apart from a lock (fenced lock) of the same name.`,
		// Runnable only to refuse a mode it does not know: a command group
		// without Run would print its help and exit 0.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError("usage: fenced rwlock read|write NAME -- CMD [ARGS...], or fenced rwlock describe NAME")
			}
			return usageError("unknown mode %q: want read, write or describe (a read/write lock has no upgrade mode: release the read grant, then take the write grant)", args[0])
		},
	}
	rw.AddCommand(newRWRunCommand(true), newRWRunCommand(false), newRWDescribeCommand())
	return rw
}

func newRWRunCommand(write bool) *cobra.Command {
	var cf clientFlags
	var ttl, wait, grace time.Duration
	mode, what := "read", "read grant"
	if write {
		mode, what = "write", "write grant"
	}
	cmd := &cobra.Command{
		Use:   mode + " NAME [flags] -- CMD [ARGS...]",
		Short: "Run CMD while holding a " + what + " of a read/write lock",
		Long: `Take a ` + what + ` of the read/write lock (waiting up to --wait in its FIFO
queue), keep it alive, and run CMD with FENCED_TOKEN, FENCED_LOCK,
FENCED_KIND ("` + mode + `"), FENCED_ISSUER, FENCED_SESSION and
FENCED_SESSION_SECRET in its environment, exactly as "fenced lock" does:
when CMD exits the grant is released and fenced exits with CMD's status;
when the grant can no longer be trusted fenced sends SIGTERM to CMD's
process group, SIGKILL after --grace, and exits 4. Send FENCED_TOKEN with
every operation on the protected resource: the token check there is what
rejects a paused CMD's late operations.

Exit status: CMD's status; 3 not granted within --wait; 4 grant lost;
2 usage; 1 other error.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 || len(args) < 2 {
				return usageError("usage: fenced rwlock %s NAME [flags] -- CMD [ARGS...]", mode)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runUnder(cmd, &cf, args[0], ttl, wait, grace, args[1:], takeRWMutex(args[0], write))
		},
	}
	runFlags(cmd, &cf, &ttl, &wait, &grace, what)
	return cmd
}

// takeRWMutex takes a read or write grant of the read/write lock name.
func takeRWMutex(name string, write bool) takeFunc {
	return func(ctx context.Context, s *client.Session) (held, error) {
		m := client.NewRWMutex(s, name)
		lock := m.RLock
		if write {
			lock = m.Lock
		}
		g, err := lock(ctx)
		if err != nil {
			return held{}, err
		}
		return held{grant: g.Grant(), ctx: g.Context(), unlock: m.Unlock}, nil
	}
}

func newRWDescribeCommand() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "describe NAME",
		Short: "Show a read/write lock's readers, writer and waiters with their modes",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError("usage: fenced rwlock describe NAME")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := fence.ValidateName(args[0]); err != nil {
				return withExit(exitUsage, err)
			}
			var st client.RWLockState
			err := cf.withClient(cmd.Context(), func(ctx context.Context, c *client.Client) (err error) {
				st, err = c.DescribeRWLock(ctx, args[0])
				return err
			})
			if err != nil {
				return classify(err)
			}
			if cf.json {
				return printRWLockJSON(cmd.OutOrStdout(), st)
			}
			return printRWLock(cmd.OutOrStdout(), st)
		},
	}
	cf.register(cmd)
	return cmd
}

func printRWLock(w io.Writer, st client.RWLockState) error {
	fmt.Fprintf(w, "%s:\n", shown(st.Name))
	if st.Writer.Token != 0 {
		fmt.Fprintf(w, "  writer  session %d  token %d\n", st.Writer.Session, st.Writer.Token)
	}
	for _, g := range st.Readers {
		fmt.Fprintf(w, "  reader  session %d  token %d\n", g.Session, g.Token)
	}
	if st.Writer.Token == 0 && len(st.Readers) == 0 {
		fmt.Fprintln(w, "  free")
	}
	_, err := fmt.Fprintf(w, "  waiters (%d):\n", st.WaiterCount)
	for i, q := range st.Waiters {
		_, err = fmt.Fprintf(w, "    %d. session %d  %s\n", i+1, q.Session, waiterMode(q))
	}
	return err
}

func waiterMode(q client.RWWaiter) string {
	if q.Write {
		return "write"
	}
	return "read"
}

type rwHolderJSON struct {
	Session string `json:"session"`
	Token   string `json:"token"`
}

type rwWaiterJSON struct {
	Session string `json:"session"`
	Mode    string `json:"mode"`
}

func printRWLockJSON(w io.Writer, st client.RWLockState) error {
	out := struct {
		Name        string         `json:"name"`
		Writer      *rwHolderJSON  `json:"writer"`
		Readers     []rwHolderJSON `json:"readers"`
		Waiters     []rwWaiterJSON `json:"waiters"`
		WaiterCount int            `json:"waiter_count"`
	}{Name: st.Name, Readers: []rwHolderJSON{}, Waiters: []rwWaiterJSON{}, WaiterCount: st.WaiterCount}
	if st.Writer.Token != 0 {
		out.Writer = &rwHolderJSON{Session: fmt.Sprint(st.Writer.Session), Token: st.Writer.Token.String()}
	}
	for _, g := range st.Readers {
		out.Readers = append(out.Readers, rwHolderJSON{Session: fmt.Sprint(g.Session), Token: g.Token.String()})
	}
	for _, q := range st.Waiters {
		out.Waiters = append(out.Waiters, rwWaiterJSON{Session: fmt.Sprint(q.Session), Mode: waiterMode(q)})
	}
	return json.NewEncoder(w).Encode(out)
}
