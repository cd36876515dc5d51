package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/fenced-dev/fenced/client"
)

func newLimiterCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "limiter",
		Short: "Rate limiters decided by the cluster",
		Long: `Rate limiters whose every decision is a consensus write, decided with the
leader's clock: "config NAME" creates or changes one (fixed_window,
sliding_window with --segments, token_bucket with --rate), "take NAME" takes
permits (granted, or not with a retry-after), "describe NAME" prints its
configuration and what it has free. docs/limiter.md.

Exit status: 0 done (granted); 3 not granted; 2 usage (a malformed
configuration, or a change refused while permits are out); 1 other error.`,
	}
	cmd.AddCommand(newLimiterConfigCommand(), newLimiterTakeCommand(), newLimiterDescribeCommand())
	return cmd
}

func specText(s client.LimiterSpec) string {
	switch s.Algorithm {
	case client.TokenBucket:
		return fmt.Sprintf("token_bucket capacity %d, refills %d per %v, queue %d", s.Limit, s.Rate, s.Window, s.Queue)
	case client.SlidingWindow:
		return fmt.Sprintf("sliding_window %d per %v in %d segments, queue %d", s.Limit, s.Window, s.Segments, s.Queue)
	}
	return fmt.Sprintf("%s %d per %v, queue %d", s.Algorithm, s.Limit, s.Window, s.Queue)
}

func newLimiterConfigCommand() *cobra.Command {
	var f clientFlags
	var spec client.LimiterSpec
	var replace bool
	cmd := &cobra.Command{
		Use:   "config NAME --algorithm A --limit N --window D [--segments S] [--rate R] [--queue Q] [--replace]",
		Short: "Create a rate limiter or change its configuration",
		Long: `Create a rate limiter or change its configuration. A change is refused
while permits are out under the old one (taken in a window not yet over, a
bucket not yet full again, takes waiting) unless --replace, which starts the
limiter afresh: what was counted under the old configuration is forgotten.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if spec.Window%time.Millisecond != 0 {
				return usageError("--window %v is not a whole number of milliseconds", spec.Window)
			}
			var changed bool
			err := f.withClient(cmd.Context(), func(ctx context.Context, c *client.Client) (err error) {
				changed, err = c.LimiterConfig(ctx, args[0], spec, replace)
				return err
			})
			if err != nil {
				return classify(err)
			}
			if f.json {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"name": args[0], "changed": changed})
			}
			what := "unchanged"
			if changed {
				what = "configured"
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: %s: %s\n", shown(args[0]), what, specText(spec))
			return err
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&spec.Algorithm, "algorithm", client.TokenBucket, "fixed_window, sliding_window or token_bucket")
	cmd.Flags().Uint64Var(&spec.Limit, "limit", 0, "permits per window, or the bucket's capacity")
	cmd.Flags().DurationVar(&spec.Window, "window", time.Second, "the window, or the period in which a bucket refills --rate tokens")
	cmd.Flags().Uint32Var(&spec.Segments, "segments", 0, "a sliding window's segments (dividing --window)")
	cmd.Flags().Uint64Var(&spec.Rate, "rate", 0, "tokens a bucket refills per --window")
	cmd.Flags().Uint32Var(&spec.Queue, "queue", 0, "how many takes may wait at once (0: none; at most the server's --max-limiter-queue)")
	cmd.Flags().BoolVar(&replace, "replace", false, "change the configuration even with permits out, starting the limiter afresh")
	return cmd
}

func newLimiterTakeCommand() *cobra.Command {
	var f clientFlags
	var permits uint64
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "take NAME [--permits N] [--wait D]",
		Short: "Take permits from a rate limiter",
		Long: `Take permits: granted (exit 0), or not granted with when to retry (exit 3).
With --wait D and a limiter with a queue, the take waits up to D in the
queue and is answered when its permits are granted.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if wait < 0 {
				return usageError("--wait %v is negative", wait)
			}
			c, err := f.client(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			ctx, cancel := f.context(cmd.Context(), 0)
			defer cancel()
			var r client.Reservation
			if wait > 0 {
				wctx, cancel := context.WithTimeout(cmd.Context(), wait)
				defer cancel()
				err = c.Limiter(args[0]).WaitN(wctx, permits)
				r.OK = err == nil
				if wctx.Err() != nil {
					err = nil // not granted within --wait
				}
			} else {
				r, err = c.Limiter(args[0]).ReserveN(ctx, permits)
			}
			if err != nil {
				return classify(err)
			}
			if f.json {
				if err := json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"name": args[0], "granted": r.OK, "permits": permits, "retry_after_ms": r.RetryAfter.Milliseconds()}); err != nil {
					return err
				}
			} else if r.OK {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: granted %d\n", shown(args[0]), permits)
			} else if wait > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: not granted within %v\n", shown(args[0]), wait)
			} else {
				// Whole seconds rounded up, like HTTP's Retry-After (--json: ms).
				fmt.Fprintf(cmd.OutOrStdout(), "%s: not granted, retry after %ds\n", shown(args[0]), (r.RetryAfter+time.Second-1)/time.Second)
			}
			if !r.OK {
				return withExit(exitNotGranted, nil)
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().Uint64Var(&permits, "permits", 1, "how many permits to take (1 to the limit)")
	cmd.Flags().DurationVar(&wait, "wait", 0, "wait up to this long for the permits (in the limiter's queue when it has one)")
	return cmd
}

func newLimiterDescribeCommand() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{
		Use:   "describe NAME",
		Short: "Print a rate limiter's configuration and what it has free now",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var info client.LimiterInfo
			err := f.withClient(cmd.Context(), func(ctx context.Context, c *client.Client) (err error) {
				info, err = c.LimiterDescribe(ctx, args[0])
				return err
			})
			if err != nil {
				return classify(err)
			}
			if f.json {
				s := info.Spec
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{
					"name": args[0], "algorithm": s.Algorithm, "limit": s.Limit, "window_ms": s.Window.Milliseconds(), "segments": s.Segments, "rate": s.Rate, "queue": s.Queue,
					"available": info.Available, "waiting": info.Waiting,
				})
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: %s; %d available, %d waiting\n", shown(args[0]), specText(info.Spec), info.Available, info.Waiting)
			return err
		},
	}
	f.register(cmd)
	return cmd
}
