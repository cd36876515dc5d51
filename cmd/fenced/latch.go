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

	"github.com/fenced-dev/fenced/client"
)

// exitReplaced is the exit status of a latch command whose generation a
// reset replaced.
const exitReplaced = 5

func newLatchCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "latch",
		Short: "Countdown latches with generations",
		Long: `Countdown latches: "create NAME --count N" starts a generation with a count
(creating the latch, or replacing its generation: a reset); "count-down"
counts one generation down; "wait" blocks until a generation reaches zero;
"join" prints the current generation and count. A count-down or wait for a
generation a reset replaced is answered "replaced" (exit 5); a count-down to
a generation already at zero changes nothing (exit 0). docs/latch.md.

Exit status: 0 done; 3 wait ran out; 5 generation replaced; 2 usage; 1 other
error.`,
	}
	cmd.AddCommand(newLatchCreateCommand(), newLatchCountDownCommand(), newLatchWaitCommand(), newLatchJoinCommand())
	return cmd
}

type latchJSON struct {
	Name       string `json:"name"`
	Generation string `json:"generation"`
	Count      uint64 `json:"count"`
	Initial    uint64 `json:"initial"`
	Result     string `json:"result,omitempty"`
}

func printLatch(w io.Writer, asJSON bool, l client.Latch, result string) error {
	if asJSON {
		return json.NewEncoder(w).Encode(latchJSON{Name: l.Name, Generation: strconv.FormatUint(l.Generation, 10), Count: l.Count, Initial: l.Initial, Result: result})
	}
	if result != "" {
		result += ": "
	}
	_, err := fmt.Fprintf(w, "%s: %sgeneration %d, count %d of %d\n", shown(l.Name), result, l.Generation, l.Count, l.Initial)
	return err
}

func newLatchCreateCommand() *cobra.Command {
	var f clientFlags
	var count int64
	cmd := &cobra.Command{
		Use:   "create NAME --count N",
		Short: "Start a new generation of a latch (creates it, or resets it)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if count < 0 {
				return usageError("--count %d is below 0", count)
			}
			var l client.Latch
			err := f.withClient(cmd.Context(), func(ctx context.Context, c *client.Client) (err error) {
				l, err = c.LatchCreate(ctx, args[0], uint64(count))
				return err
			})
			if err != nil {
				return classify(err)
			}
			return printLatch(cmd.OutOrStdout(), f.json, l, "created")
		},
	}
	f.register(cmd)
	cmd.Flags().Int64Var(&count, "count", 1, "the count the generation starts with (0 to the server's --max-latch-count)")
	return cmd
}

// generation returns --generation, or the latch's current one when 0.
func latchGeneration(ctx context.Context, c *client.Client, name string, gen uint64) (uint64, error) {
	if gen != 0 {
		return gen, nil
	}
	l, err := c.LatchJoin(ctx, name)
	return l.Generation, err
}

func newLatchCountDownCommand() *cobra.Command {
	var f clientFlags
	var gen uint64
	cmd := &cobra.Command{
		Use:   "count-down NAME [--generation G]",
		Short: "Count a latch generation down by one",
		Long: `Count a latch generation down by one: the generation given, or without
--generation the current one (read first; a reset in between makes this count
the new generation down). Exit 5 when the generation was replaced.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var res client.CountDownResult
			var l client.Latch
			err := f.withClient(cmd.Context(), func(ctx context.Context, c *client.Client) (err error) {
				g, err := latchGeneration(ctx, c, args[0], gen)
				if err != nil {
					return err
				}
				res, l, err = c.LatchCountDown(ctx, args[0], g)
				return err
			})
			if errors.Is(err, client.ErrStaleGeneration) {
				return withExit(exitReplaced, err) // nothing changed; stderr names both generations
			}
			if err != nil {
				return classify(err)
			}
			return printLatch(cmd.OutOrStdout(), f.json, l, string(res))
		},
	}
	f.register(cmd)
	cmd.Flags().Uint64Var(&gen, "generation", 0, "the generation to count down (0: the current one)")
	return cmd
}

func newLatchWaitCommand() *cobra.Command {
	var f clientFlags
	var gen uint64
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "wait NAME [--generation G] [--wait D]",
		Short: "Wait until a latch generation reaches zero",
		Long: `Wait until a latch generation reaches zero (exit 0), a reset replaces it
(exit 5) or --wait passes (exit 3). Without --generation, the current one.`,
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
			g, err := latchGeneration(ctx, c, args[0], gen)
			cancel()
			if err != nil {
				return classify(err)
			}
			wctx, cancel := context.WithTimeout(cmd.Context(), wait)
			defer cancel()
			done, err := c.LatchWait(wctx, args[0], g)
			if err != nil && wctx.Err() == nil {
				return classify(err)
			}
			l := client.Latch{Name: args[0], Generation: g}
			switch {
			case done:
				return printWait(cmd.OutOrStdout(), f.json, l, "completed")
			case err == nil:
				_ = printWait(cmd.OutOrStdout(), f.json, l, "replaced")
				return withExit(exitReplaced, fmt.Errorf("latch %s generation %d was replaced by a reset", shown(args[0]), g))
			}
			_ = printWait(cmd.OutOrStdout(), f.json, l, "waiting")
			return withExit(exitNotGranted, fmt.Errorf("latch %s generation %d did not reach zero within %v", shown(args[0]), g, wait))
		},
	}
	f.register(cmd)
	cmd.Flags().Uint64Var(&gen, "generation", 0, "the generation to wait for (0: the current one)")
	cmd.Flags().DurationVar(&wait, "wait", time.Hour, "how long to wait")
	return cmd
}

// printWait prints the outcome of a wait: completed, replaced or waiting.
func printWait(w io.Writer, asJSON bool, l client.Latch, result string) error {
	if asJSON {
		return json.NewEncoder(w).Encode(map[string]string{"name": l.Name, "generation": strconv.FormatUint(l.Generation, 10), "result": result})
	}
	_, err := fmt.Fprintf(w, "%s: generation %d %s\n", shown(l.Name), l.Generation, result)
	return err
}

func newLatchJoinCommand() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{
		Use:   "join NAME",
		Short: "Print a latch's current generation and count",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var l client.Latch
			err := f.withClient(cmd.Context(), func(ctx context.Context, c *client.Client) (err error) {
				l, err = c.LatchJoin(ctx, args[0])
				return err
			})
			if err != nil {
				return classify(err)
			}
			return printLatch(cmd.OutOrStdout(), f.json, l, "")
		},
	}
	f.register(cmd)
	return cmd
}
