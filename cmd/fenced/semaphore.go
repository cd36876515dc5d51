package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
)

// semaphoreFlags are the flags of the commands that take permits.
type semaphoreFlags struct {
	capacity, permits int
	ttl, wait         time.Duration
}

func (f *semaphoreFlags) register(cmd *cobra.Command, ttl, wait time.Duration) {
	cmd.Flags().IntVar(&f.capacity, "capacity", 0, "the semaphore's number of permits, 1 to 1000000 (required; fixed while any permit is live)")
	cmd.Flags().IntVar(&f.permits, "permits", 1, "how many permits to take at once, 1 to --capacity")
	cmd.Flags().DurationVar(&f.ttl, "ttl", ttl, "session TTL (100ms to 24h)")
	cmd.Flags().DurationVar(&f.wait, "wait", wait, "how long to wait in the queue (0: try once)")
}

func (f *semaphoreFlags) validate(name string) error {
	errs := []error{fence.ValidateName(name), fence.ValidateTTL(f.ttl), fence.ValidateWait(f.wait)}
	if f.capacity < 1 || f.capacity > 1_000_000 {
		errs = append(errs, fmt.Errorf("--capacity %d: want 1 to 1000000", f.capacity))
	} else if f.permits < 1 || f.permits > f.capacity {
		errs = append(errs, fmt.Errorf("--permits %d: want 1 to --capacity (%d)", f.permits, f.capacity))
	}
	return errors.Join(errs...)
}

func newSemaphoreCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "semaphore",
		Short: "Take, release and inspect permits of counting semaphores",
		Long: `A semaphore NAME has --capacity N permits, fixed while any permit is live
(an acquire with another capacity fails and changes nothing). Each permit
has its own fencing token and a slot 0..N-1: fence the resource of a slot
as the object NAME/SLOT. Waiters are served first come, first served, and
a big request is not overtaken by smaller ones behind it. See
docs/semaphore.md.`,
	}
	cmd.AddCommand(newSemaphoreAcquireCommand(), newSemaphoreReleaseCommand(), newSemaphoreDescribeCommand(), newSemaphoreRunCommand())
	return cmd
}

func newSemaphoreAcquireCommand() *cobra.Command {
	var cf clientFlags
	var sf semaphoreFlags
	cmd := &cobra.Command{
		Use:   "acquire NAME --capacity N [--permits K]",
		Short: "Take permits and print them",
		Long: `Take --permits permits of the semaphore and print one line per permit
(with --json one object each, with the session's secret): NAME/SLOT, token,
issuer, session, TTL. The permits hang off a session of --ttl that nothing
keeps alive after this command exits: they live until that TTL runs out or
"fenced semaphore release NAME --session ID --secret S".

With --wait 0 (the default) the permits are tried once. With --wait D the
call queues (FIFO) for up to D, keeping its session alive while it waits.

Exit status: 0 granted, 3 not granted in time, 2 usage, 1 other error.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := sf.validate(name); err != nil {
				return withExit(exitUsage, err)
			}
			c, err := cf.client(cmd.Context())
			if err != nil {
				return err
			}
			ctx, cancel := cf.context(cmd.Context(), sf.wait)
			defer cancel()
			s, p, err := acquirePermits(ctx, c, name, sf)
			if err != nil {
				c.Close()
				return err
			}
			// No Close: closing the client would close the session and
			// release the permits. They live on until the session's TTL.
			return printPermits(cmd.OutOrStdout(), cf.json, p.List(), s.Secret())
		},
	}
	cf.register(cmd)
	sf.register(cmd, 30*time.Second, 0)
	return cmd
}

// acquirePermits takes sf.permits permits of name on a new session of
// sf.ttl, trying once (sf.wait 0) or waiting up to sf.wait.
func acquirePermits(ctx context.Context, c *client.Client, name string, sf semaphoreFlags) (*client.Session, *client.Permits, error) {
	s, err := c.NewSession(ctx, client.WithTTL(sf.ttl))
	if err != nil {
		return nil, nil, classify(err)
	}
	sem := client.NewSemaphore(s, name, sf.capacity)
	var p *client.Permits
	if sf.wait == 0 {
		p, err = sem.TryAcquire(ctx, sf.permits)
	} else {
		wctx, cancel := context.WithTimeout(ctx, sf.wait)
		p, err = sem.Acquire(wctx, sf.permits)
		if err != nil && wctx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("%w: %v", fence.ErrNotGranted, err)
		}
		cancel()
	}
	if err != nil {
		cctx, cancel := cleanupContext(ctx)
		s.Close(cctx)
		cancel()
		switch {
		case errors.Is(err, fence.ErrNotGranted) && sf.wait == 0:
			return nil, nil, withExit(exitNotGranted, err)
		case errors.Is(err, fence.ErrNotGranted):
			return nil, nil, withExit(exitNotGranted, fmt.Errorf("%s: %d permits not granted within %v", name, sf.permits, sf.wait))
		}
		return nil, nil, classify(err)
	}
	return s, p, nil
}

// printPermits prints one line per permit, or with asJSON one grant object
// each (kind permit, scope NAME/SLOT) with the session's secret.
func printPermits(w io.Writer, asJSON bool, ps []client.Permit, secret string) error {
	for _, p := range ps {
		var err error
		if asJSON {
			err = printGrant(w, true, p.Grant, secret)
		} else {
			_, err = fmt.Fprintf(w, "%s: granted token %d (slot %d, issuer %s, session %d, ttl %v)\n", shown(p.Scope()), p.Token, p.Slot, shown(p.Grant.Issuer), p.Grant.Session, p.Grant.TTL)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func newSemaphoreReleaseCommand() *cobra.Command {
	var cf clientFlags
	var session, secret string
	cmd := &cobra.Command{
		Use:   "release NAME --session ID --secret S",
		Short: "Release every permit a session holds of a semaphore",
		Long: `Release the permits a session holds of the semaphore and print the result:
released, already_released (the session held none) or not_owned (it held
none and other sessions hold permits; nothing changed). The session's
secret proves the release comes from its owner. Exit status 0, except 1
for not_owned and for a refused release.`,
		Args: exactArgs(1),
		RunE: runRelease(&cf, &session, &secret, "fenced semaphore acquire --json", func(ctx context.Context, c *client.Client, name string, id uint64, secret string) (client.ReleaseResult, error) {
			return c.ReleaseSemaphore(ctx, name, id, secret)
		}),
	}
	cf.register(cmd)
	cmd.Flags().StringVar(&session, "session", os.Getenv("FENCED_SESSION"), "the session holding the permits (env FENCED_SESSION; required)")
	cmd.Flags().StringVar(&secret, "secret", os.Getenv("FENCED_SESSION_SECRET"), "the session's secret (env FENCED_SESSION_SECRET; required)")
	return cmd
}

func newSemaphoreDescribeCommand() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "describe NAME",
		Short: "Show a semaphore's capacity, holders (slots, tokens) and waiters",
		Long: `Show the semaphore's capacity, its live permits by slot with their tokens
and sessions, and its waiters in the order they will be served (at most
1000 of each are listed, with the totals). A semaphore not in use has
capacity 0. The answer is linearizable: the leader confirms its leadership
before it answers.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := fence.ValidateName(args[0]); err != nil {
				return withExit(exitUsage, err)
			}
			var st client.SemaphoreState
			err := cf.withClient(cmd.Context(), func(ctx context.Context, c *client.Client) (err error) {
				st, err = c.DescribeSemaphore(ctx, args[0])
				return err
			})
			if err != nil {
				return classify(err)
			}
			return printSemaphore(cmd.OutOrStdout(), cf.json, st)
		},
	}
	cf.register(cmd)
	return cmd
}

func printSemaphore(w io.Writer, asJSON bool, st client.SemaphoreState) error {
	if asJSON {
		type holder struct {
			Slot    int    `json:"slot"`
			Token   string `json:"token"`
			Session string `json:"session"`
		}
		type waiter struct {
			Session string `json:"session"`
			Permits int    `json:"permits"`
		}
		out := struct {
			Name     string   `json:"name"`
			Capacity int      `json:"capacity"`
			Held     int      `json:"held"`
			Holders  []holder `json:"holders"`
			Waiting  int      `json:"waiting"`
			Waiters  []waiter `json:"waiters"`
		}{Name: st.Name, Capacity: st.Capacity, Held: st.Held, Waiting: st.WaiterCount, Holders: []holder{}, Waiters: []waiter{}}
		for _, p := range st.Holders {
			out.Holders = append(out.Holders, holder{p.Slot, p.Token.String(), fmt.Sprint(p.Grant.Session)})
		}
		for _, x := range st.Waiters {
			out.Waiters = append(out.Waiters, waiter{fmt.Sprint(x.Session), x.Permits})
		}
		return json.NewEncoder(w).Encode(out)
	}
	var b strings.Builder
	if st.Capacity == 0 {
		fmt.Fprintf(&b, "%s: not in use\n", shown(st.Name))
	} else {
		fmt.Fprintf(&b, "%s: capacity %d, %d held, %d waiting\n", shown(st.Name), st.Capacity, st.Held, st.WaiterCount)
	}
	for _, p := range st.Holders {
		fmt.Fprintf(&b, "  slot %d: token %d, session %d\n", p.Slot, p.Token, p.Grant.Session)
	}
	for i, x := range st.Waiters {
		fmt.Fprintf(&b, "  waiter %d: session %d, %d permits\n", i+1, x.Session, x.Permits)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func newSemaphoreRunCommand() *cobra.Command {
	var cf clientFlags
	var sf semaphoreFlags
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "run NAME --capacity N [--permits K] [flags] -- CMD [ARGS...]",
		Short: "Run CMD while holding permits",
		Long: `Take the permits (waiting up to --wait), keep them alive with their
session, and run CMD with FENCED_TOKEN and FENCED_SLOT (the first permit's
token and slot), FENCED_TOKENS and FENCED_SLOTS (all of them,
comma-separated, in slot order), FENCED_SEMAPHORE, FENCED_ISSUER,
FENCED_SESSION and FENCED_SESSION_SECRET in its environment. When CMD exits
the permits are released and fenced exits with CMD's status.

When the permits can no longer be trusted, fenced stops CMD exactly as
"fenced lock" does: SIGTERM to its process group, SIGKILL after --grace,
a line on stderr, exit 4. CMD should send its slot's token with every
write to the object NAME/SLOT: a paused CMD cannot be stopped in time, the
token check at the resource is what rejects its late writes.

Exit status: CMD's status; 3 not granted within --wait; 4 permits lost;
2 usage; 1 other error.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 || len(args) < 2 {
				return usageError("usage: fenced semaphore run NAME --capacity N [flags] -- CMD [ARGS...]")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			name, argv := args[0], args[1:]
			if err := sf.validate(name); err != nil {
				return withExit(exitUsage, err)
			}
			if sf.wait == 0 {
				return usageError("--wait must be above 0 for run")
			}
			if grace < 0 || grace > maxTimeout {
				return usageError("--grace must be between 0 and %v, got %v", maxTimeout, grace)
			}
			c, err := cf.client(cmd.Context())
			if err != nil {
				return err
			}
			actx, cancel := cf.context(cmd.Context(), sf.wait)
			defer cancel()
			err = runPermits(actx, c, name, sf, grace, argv)
			var ec *exitCodeError
			if errors.As(err, &ec) && ec.code == exitLockLost {
				return err // exit now, as fenced lock does
			}
			c.Close()
			return err
		},
	}
	cf.register(cmd)
	sf.register(cmd, 15*time.Second, 30*time.Second)
	cmd.Flags().DurationVar(&grace, "grace", 5*time.Second, "time between SIGTERM and SIGKILL when the permits are lost")
	return cmd
}

// runPermits holds the permits while argv runs (runHeld, lock.go).
func runPermits(acquireCtx context.Context, c *client.Client, name string, sf semaphoreFlags, grace time.Duration, argv []string) error {
	s, p, err := acquirePermits(acquireCtx, c, name, sf)
	if err != nil {
		return err
	}
	defer func() {
		if s.Err() != nil {
			return // lost: the SDK already asked the server to close it
		}
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Close(cctx)
	}()
	ps := p.List()
	var tokens, slots []string
	for _, x := range ps {
		tokens, slots = append(tokens, x.Token.String()), append(slots, strconv.Itoa(x.Slot))
	}
	env := []string{
		"FENCED_TOKEN=" + ps[0].Token.String(),
		"FENCED_SLOT=" + strconv.Itoa(ps[0].Slot),
		"FENCED_TOKENS=" + strings.Join(tokens, ","),
		"FENCED_SLOTS=" + strings.Join(slots, ","),
		"FENCED_SEMAPHORE=" + name,
		"FENCED_ISSUER=" + ps[0].Grant.Issuer,
		"FENCED_SESSION=" + strconv.FormatUint(s.ID(), 10),
		"FENCED_SESSION_SECRET=" + s.Secret(),
	}
	lost := func() string {
		return fmt.Sprintf("permits of %q lost (slots %s, tokens %s)", name, strings.Join(slots, ","), strings.Join(tokens, ","))
	}
	return runHeld(p.Context(), env, argv, grace, lost, func() {
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p.Release(rctx)
	})
}
