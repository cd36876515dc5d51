package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
)

func newElectCommand() *cobra.Command {
	var cf clientFlags
	var ttl, wait, grace time.Duration
	var value string
	cmd := &cobra.Command{
		Use:   "elect NAME [flags] -- CMD [ARGS...]",
		Short: "Run CMD only while leading an election",
		Long: `Campaign in the election NAME with --value, wait (up to --wait; 0 waits
until elected) behind the earlier candidates, and once elected run CMD with
FENCED_TOKEN (the term token), FENCED_ELECTION, FENCED_VALUE and
FENCED_ISSUER in its environment, and FENCED_SESSION and
FENCED_SESSION_SECRET, the session leading and its secret. When CMD exits
the leadership is resigned (the next candidate leads with a higher token)
and fenced exits with CMD's status.

When the leadership can no longer be trusted (the session's renewals
unconfirmed until its local validity ran out, or the server says it is
gone), fenced stops CMD exactly like "fenced lock" does: SIGTERM to its
process group, SIGKILL after --grace, a line on stderr naming the election
and term token lost, exit 4. CMD should send FENCED_TOKEN with every
protected write: the token check at the resource is what rejects a
paused leader's late writes.

Exit status: CMD's status; 3 not elected within --wait; 4 leadership lost;
2 usage; 1 other error.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 || len(args) < 2 {
				return usageError("usage: fenced elect NAME [flags] -- CMD [ARGS...]")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			name, argv := args[0], args[1:]
			if err := errors.Join(fence.ValidateName(name), fence.ValidateTTL(ttl)); err != nil {
				return withExit(exitUsage, err)
			}
			if wait != 0 {
				if err := fence.ValidateWait(wait); err != nil {
					return withExit(exitUsage, err)
				}
			}
			if grace < 0 || grace > maxTimeout {
				return usageError("--grace must be between 0 and %v, got %v", maxTimeout, grace)
			}
			c, err := cf.client(cmd.Context())
			if err != nil {
				return err
			}
			err = runElected(cmd.Context(), &cf, c, name, value, ttl, wait, grace, argv)
			var ec *exitCodeError
			if errors.As(err, &ec) && ec.code == exitLockLost {
				return err // as fenced lock: do not wait for an unreachable server
			}
			c.Close()
			return err
		},
	}
	cf.register(cmd)
	cmd.Flags().StringVar(&value, "value", "", "the candidate's value, the leader's once elected (at most the server's --max-election-value-bytes)")
	cmd.Flags().DurationVar(&ttl, "ttl", 15*time.Second, "session TTL (100ms to 24h); renewed every TTL/3")
	cmd.Flags().DurationVar(&wait, "wait", 0, "how long to wait to be elected (0: until elected)")
	cmd.Flags().DurationVar(&grace, "grace", 5*time.Second, "time between SIGTERM and SIGKILL when the leadership is lost")
	return cmd
}

// runElected campaigns for name and runs argv while leading.
func runElected(ctx context.Context, cf *clientFlags, c *client.Client, name, value string, ttl, wait, grace time.Duration, argv []string) error {
	sctx, cancel := cf.context(ctx, 0)
	s, err := c.NewSession(sctx, client.WithTTL(ttl))
	cancel()
	if err != nil {
		return classify(err)
	}
	e := client.NewElection(s, name)
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if wait > 0 {
		wctx, cancel = context.WithTimeout(ctx, wait)
	}
	_, err = e.Campaign(wctx, value)
	cancel()
	closeSession, err := endTake(ctx, wctx, s, err, fmt.Sprintf("%s: not elected within %v", name, wait))
	if err != nil {
		return err
	}
	defer closeSession()
	g := e.Grant()
	env := []string{
		"FENCED_TOKEN=" + g.Token.String(),
		"FENCED_ELECTION=" + g.Name,
		"FENCED_VALUE=" + value,
		"FENCED_ISSUER=" + g.Issuer,
		"FENCED_SESSION=" + strconv.FormatUint(s.ID(), 10),
		"FENCED_SESSION_SECRET=" + s.Secret(),
	}
	lost := func() string { return fmt.Sprintf("leadership of %q lost (token %d)", g.Name, g.Token) }
	// The runner of fenced lock (lock.go): stopped on loss the same way.
	return runHeld(e.Context(), env, argv, grace, lost, func() {
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		e.Resign(rctx)
	})
}

func newObserveCommand() *cobra.Command {
	var cf clientFlags
	var count int
	var after uint64
	cmd := &cobra.Command{
		Use:   "observe NAME",
		Short: "Print the leader of an election and every change of it",
		Long: `Print the election's current leader and value (or, with --after REV, the
changes after revision REV), then one line for every change of its
leader or value, as the server pushes them, until interrupted (or
--count lines). A broken stream is resumed, on another
endpoint if need be, after the last revision printed: no change is
missed across a reconnect or a failover of the cluster's leader. A line
marked skipped follows a gap longer than the changes the server keeps.

Each line: the revision, and the leader's session, term token and value,
or "no leader". With --json, one object per line: name, revision,
prev_revision, leader (false when nobody leads), session, token, value,
skipped.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := fence.ValidateName(name); err != nil {
				return withExit(exitUsage, err)
			}
			if count < 0 {
				return usageError("--count must be 0 (no limit) or more, got %d", count)
			}
			c, err := cf.client(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			// The first state must come within --timeout; after that the
			// observation lasts until interrupted.
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			first := time.AfterFunc(cf.timeout, cancel)
			printed := 0
			for st := range c.ObserveElectionAfter(ctx, name, after) {
				first.Stop()
				if err := printElectionState(cmd.OutOrStdout(), cf.json, st); err != nil {
					return err
				}
				if printed++; count > 0 && printed >= count {
					return nil
				}
			}
			if cmd.Context().Err() != nil {
				return nil // interrupted
			}
			if printed == 0 {
				return fmt.Errorf("observe %s: no answer within --timeout %v", shown(name), cf.timeout)
			}
			return fmt.Errorf("observe %s: the observation ended", shown(name))
		},
	}
	cf.register(cmd)
	cmd.Flags().IntVar(&count, "count", 0, "exit after printing this many lines (0: until interrupted)")
	cmd.Flags().Uint64Var(&after, "after", 0, "start with the changes after this revision (0: with the current state)")
	return cmd
}

// electionJSON is one line of fenced observe --json.
type electionJSON struct {
	Name         string `json:"name"`
	Revision     string `json:"revision"`
	PrevRevision string `json:"prev_revision"`
	Leader       bool   `json:"leader"`
	Session      string `json:"session,omitempty"`
	Token        string `json:"token,omitempty"`
	Value        string `json:"value"`
	Skipped      bool   `json:"skipped,omitempty"`
}

func printElectionState(w io.Writer, asJSON bool, st client.ElectionState) error {
	if asJSON {
		out := electionJSON{Name: st.Name, Revision: fmt.Sprint(st.Revision), PrevRevision: fmt.Sprint(st.PrevRevision), Leader: st.HasLeader(), Value: st.Value, Skipped: st.Skipped}
		if st.HasLeader() {
			out.Session, out.Token = fmt.Sprint(st.Leader.Session), st.Leader.Token.String()
		}
		return json.NewEncoder(w).Encode(out)
	}
	skipped := ""
	if st.Skipped {
		skipped = " (skipped earlier changes)"
	}
	if !st.HasLeader() {
		_, err := fmt.Fprintf(w, "%s rev %d: no leader%s\n", shown(st.Name), st.Revision, skipped)
		return err
	}
	_, err := fmt.Fprintf(w, "%s rev %d: leader session %d token %d value %s%s\n", shown(st.Name), st.Revision, st.Leader.Session, st.Leader.Token, strconv.Quote(st.Value), skipped)
	return err
}
