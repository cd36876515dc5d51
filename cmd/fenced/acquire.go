package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
)

func newAcquireCommand() *cobra.Command {
	var cf clientFlags
	var ttl, wait time.Duration
	var delay lockDelayFlag
	cmd := &cobra.Command{
		Use:   "acquire NAME",
		Short: "Take a lock with a TTL of its own and print the grant",
		Long: `Take a lock and print the grant: name, token, issuer, session, TTL, and
with --json the session's secret. The grant lives until its TTL runs out or
"fenced release NAME --session ID --secret S", which needs that secret;
nothing keeps it alive after this command exits, but "fenced renew NAME
--session ID --secret S [--ttl D]" renews it (same token).

With --wait 0 (the default) the lock is tried once. With --wait D the call
queues (FIFO) for up to D, keeping its session alive while it waits; the
grant then lives at least TTL minus TTL/3 after it was made.

Exit status: 0 granted, 3 not granted in time, 2 usage, 1 other error.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := errors.Join(fence.ValidateName(name), fence.ValidateTTL(ttl), fence.ValidateWait(wait)); err != nil {
				return withExit(exitUsage, err)
			}
			opts, err := delay.options()
			if err != nil {
				return err
			}
			c, err := cf.client(cmd.Context())
			if err != nil {
				return err
			}
			ctx, cancel := cf.context(cmd.Context(), wait)
			defer cancel()
			stopWaiting := showWait(newProgress(os.Stderr, cf.json), name, wait)
			g, secret, err := acquire(ctx, c, name, ttl, wait, opts...)
			stopWaiting()
			if errors.Is(err, fence.ErrNotGranted) {
				c.Close()
				if wait == 0 && errors.Is(err, client.ErrLockDelayed) {
					return withExit(exitNotGranted, fmt.Errorf("%s: not granted: in its lock delay after its holder expired or was revoked", name))
				}
				return withExit(exitNotGranted, fmt.Errorf("%s: not granted within %v", name, wait))
			}
			if err != nil {
				c.Close()
				return classify(cf.explain(err))
			}
			// No Close: closing the client would close a waiting session and
			// release the grant. The grant lives on until its TTL.
			return printGrant(cmd.OutOrStdout(), cf.json, g, secret)
		},
	}
	cf.register(cmd)
	delay.register(cmd)
	cmd.Flags().DurationVar(&ttl, "ttl", 30*time.Second, "TTL of the grant (100ms to 24h); \"fenced renew\" extends it")
	cmd.Flags().DurationVar(&wait, "wait", 0, "how long to wait in the queue (0: try once)")
	return cmd
}

// acquire takes name once (wait 0) with a per-grant lease, or waits for it
// on a session kept alive while waiting. It returns the grant and the
// secret of its session.
func acquire(ctx context.Context, c *client.Client, name string, ttl, wait time.Duration, opts ...client.LockOption) (fence.Grant, string, error) {
	if wait == 0 {
		l, err := c.Acquire(ctx, name, ttl, opts...)
		if err != nil {
			return fence.Grant{}, "", err
		}
		return l.Grant(), l.Secret(), nil
	}
	s, err := c.NewSession(ctx, client.WithTTL(ttl))
	if err != nil {
		return fence.Grant{}, "", err
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	m := client.NewMutex(s, name, opts...)
	if err := m.Lock(wctx); err != nil {
		cctx, cancel := cleanupContext(ctx)
		s.Close(cctx)
		cancel()
		if wctx.Err() != nil && ctx.Err() == nil {
			return fence.Grant{}, "", fmt.Errorf("%w: %v", fence.ErrNotGranted, err)
		}
		return fence.Grant{}, "", err
	}
	return m.Grant(), s.Secret(), nil
}

// exactArgs is cobra.ExactArgs with a usage exit code.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError("%s takes %d argument(s), got %d (see %s --help)", cmd.Name(), n, len(args), cmd.CommandPath())
		}
		return nil
	}
}

// showWait shows, on a terminal, how long an acquire has waited, from a
// second after it started until the returned stop is called.
func showWait(line *progressLine, name string, wait time.Duration) (stop func()) {
	if wait <= time.Second {
		return func() {}
	}
	start := time.Now()
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				line.update("fenced: waiting for %s: %v of %v", shown(name), time.Since(start).Round(time.Second), wait)
			}
		}
	}()
	return func() { close(done); <-finished; line.clear() }
}
