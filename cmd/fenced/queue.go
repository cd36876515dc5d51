package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/fsm"
)

// maxPayloadRead bounds a payload read from standard input: the largest
// any server accepts, plus one byte to tell it is too long.
const maxPayloadRead = fsm.MaxQueuePayloadBytes + 1

func newQueueCommand() *cobra.Command {
	q := &cobra.Command{
		Use:   "queue",
		Short: "Push to and claim from work queues with fenced claims",
		Long: `Work queues whose claims carry fencing tokens (docs/queue.md). An item is
claimed by one worker at a time, with a claim token from the cluster's one
counter; the claim ends by ack (done), nack (back to the queue) or when its
visibility timeout runs out without an extend (back to the queue; the next
claim's token is higher). An ack or nack with a token that is not the
item's current claim is refused (exit 5) and changes nothing. After its
last delivery (--max-deliveries, server default 5) an item moves to the
dead-letter queue QUEUE.dead. Delivery is at least once: send the claim
token (FENCED_TOKEN) with every write the work makes, object QUEUE/ITEM.

Exit status: 0 done; 3 no item within --wait (claim); 5 stale claim token
(ack, nack); 2 usage; 1 other error.`,
	}
	q.AddCommand(newQueuePushCommand(), newQueueClaimCommand(), newQueueAckCommand(false), newQueueAckCommand(true), newQueueStatsCommand())
	return q
}

func newQueuePushCommand() *cobra.Command {
	var f clientFlags
	var dedupe string
	var delay time.Duration
	var maxDel uint32
	var lines bool
	var batch int
	cmd := &cobra.Command{
		Use:   "push QUEUE [PAYLOAD]",
		Short: "Enqueue an item (PAYLOAD, or standard input when omitted)",
		Long: `Enqueue an item: PAYLOAD, or standard input when omitted.

With --lines every line of the input (PAYLOAD or standard input) is an
item of its own, pushed --batch at a time in one call each (PushBatch:
all of a batch or none); one line per item is printed. A batch the server
refuses stops the command; the batches before it were enqueued.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return usageError("usage: fenced queue push QUEUE [PAYLOAD] [--dedupe-key K] [--delay D]")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := errors.Join(fsm.ValidateQueueName(args[0]), fsm.ValidateQueueDelayMillis(delay.Milliseconds())); err != nil {
				return withExit(exitUsage, err)
			}
			if lines && dedupe != "" {
				return usageError("--dedupe-key names one item; with --lines every item gets a random key of its own")
			}
			if batch < 1 || batch > fsm.MaxQueueBatch {
				return usageError("--batch %d is out of range; want 1 to %d", batch, fsm.MaxQueueBatch)
			}
			var payload []byte
			if len(args) == 2 {
				payload = []byte(args[1])
			} else {
				var err error
				if payload, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), maxPayloadRead)); err != nil {
					return err
				}
			}
			if lines {
				return pushLines(cmd, f, args[0], payload, batch, client.PushItem{Delay: delay, MaxDeliveries: maxDel})
			}
			opts := []client.PushOption{client.WithDelay(delay), client.WithMaxDeliveries(maxDel)}
			if dedupe != "" {
				opts = append(opts, client.WithDedupeKey(dedupe))
			}
			var item uint64
			var dup bool
			err := f.withClient(cmd.Context(), func(ctx context.Context, c *client.Client) (err error) {
				item, dup, err = client.NewQueue(c, args[0]).Push(ctx, payload, opts...)
				return err
			})
			if err != nil {
				return classify(err)
			}
			if f.json {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"queue": args[0], "item": strconv.FormatUint(item, 10), "duplicate": dup})
			}
			what := "pushed"
			if dup {
				what = "already pushed (same dedupe key)"
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: %s item %d\n", shown(args[0]), what, item)
			return err
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&dedupe, "dedupe-key", "", "enqueue once per key while the queue remembers it (a retry's key); default: a random key")
	cmd.Flags().DurationVar(&delay, "delay", 0, "keep the item from being claimed for this long (at most 12h)")
	cmd.Flags().Uint32Var(&maxDel, "max-deliveries", 0, "deliveries before the item moves to QUEUE.dead (0: the server's --queue-max-deliveries)")
	cmd.Flags().BoolVar(&lines, "lines", false, "every line of the input is an item of its own (empty lines too, but not a final newline)")
	cmd.Flags().IntVar(&batch, "batch", fsm.MaxQueueBatch, "with --lines, items per call (1 to 32; at most the server's --queue-max-batch)")
	return cmd
}

// pushLines pushes every line of input as an item of queue, batch at a
// time, each item with the options of like, and prints one line per item.
func pushLines(cmd *cobra.Command, f clientFlags, queue string, input []byte, batch int, like client.PushItem) error {
	text := strings.TrimSuffix(string(input), "\n")
	if text == "" {
		return usageError("--lines: the input has no line")
	}
	all := strings.Split(text, "\n")
	return classify(f.withClient(cmd.Context(), func(ctx context.Context, c *client.Client) error {
		q := client.NewQueue(c, queue)
		for start := 0; start < len(all); start += batch {
			chunk := all[start:min(start+batch, len(all))]
			items := make([]client.PushItem, len(chunk))
			for i, l := range chunk {
				items[i] = like
				items[i].Payload = []byte(l)
			}
			pushed, err := q.PushBatch(ctx, items)
			if err != nil {
				return fmt.Errorf("lines %d to %d: %w", start+1, start+len(chunk), err)
			}
			for _, p := range pushed {
				if f.json {
					if err := json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"queue": queue, "item": strconv.FormatUint(p.Item, 10), "duplicate": p.Duplicate}); err != nil {
						return err
					}
					continue
				}
				if _, err := fmt.Fprintf(cmd.OutOrStdout(), "%s: pushed item %d\n", shown(queue), p.Item); err != nil {
					return err
				}
			}
		}
		return nil
	}))
}

// claimJSON is the JSON form of a claim.
type claimJSON struct {
	Queue         string `json:"queue"`
	Item          string `json:"item"`
	Token         string `json:"token"`
	Scope         string `json:"scope"`
	Kind          string `json:"kind"`
	Issuer        string `json:"issuer"`
	Deliveries    uint32 `json:"deliveries"`
	MaxDeliveries uint32 `json:"max_deliveries"`
	VisibilityMs  int64  `json:"visibility_ms"`
	Payload       string `json:"payload"`
}

func newQueueClaimCommand() *cobra.Command {
	var f clientFlags
	var visibility, wait time.Duration
	cmd := &cobra.Command{
		Use:   "claim QUEUE",
		Short: "Claim the oldest available item and print it with its claim token",
		Long: `Claim the oldest available item (waiting up to --wait for one to be pushed)
and print it with its claim token. The claim is not kept alive: it ends
when --visibility runs out unless acked or nacked before ("fenced queue
ack QUEUE ITEM --token T"). "fenced work" claims and keeps claims alive.

Exit status: 0 claimed; 3 no item within --wait; 2 usage; 1 other error.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := errors.Join(fsm.ValidateQueueName(args[0]), fsm.ValidateVisibilityMillis(visibility.Milliseconds()), fence.ValidateWait(wait)); err != nil {
				return withExit(exitUsage, err)
			}
			c, err := f.client(cmd.Context())
			if err != nil {
				return err
			}
			// The client is not closed, which would close the claim's
			// session and so end the claim: the session, whose TTL is the
			// visibility timeout, is left to expire, and the claim outlives
			// this command by at most that.
			ctx, cancel := f.context(cmd.Context(), wait)
			defer cancel()
			s, err := c.NewSession(ctx, client.WithTTL(visibility))
			if err != nil {
				return classify(err)
			}
			q := client.NewQueue(c, args[0])
			var cl *client.Claim
			if wait > 0 {
				wctx, wcancel := context.WithTimeout(ctx, wait)
				cl, err = q.Claim(wctx, s, visibility)
				wcancel()
				if err != nil && errors.Is(wctx.Err(), context.DeadlineExceeded) && cmd.Context().Err() == nil {
					err = fmt.Errorf("%w: no item within %v", fence.ErrNotGranted, wait)
				}
			} else {
				cl, err = q.TryClaim(ctx, s, visibility)
			}
			if errors.Is(err, fence.ErrNotGranted) {
				cctx, ccancel := cleanupContext(cmd.Context())
				s.Close(cctx)
				ccancel()
				return withExit(exitNotGranted, fmt.Errorf("%s: no item available", shown(args[0])))
			}
			if err != nil {
				return classify(err)
			}
			return printClaim(cmd.OutOrStdout(), f.json, cl, visibility)
		},
	}
	f.register(cmd)
	cmd.Flags().DurationVar(&visibility, "visibility", 30*time.Second, "the claim's visibility timeout (100ms to 12h)")
	cmd.Flags().DurationVar(&wait, "wait", 0, "how long to wait for an item to be pushed")
	return cmd
}

func printClaim(w io.Writer, asJSON bool, cl *client.Claim, visibility time.Duration) error {
	if asJSON {
		return json.NewEncoder(w).Encode(claimJSON{
			Queue: cl.Queue, Item: strconv.FormatUint(cl.Item, 10), Token: cl.Token.String(), Scope: cl.Scope, Kind: string(cl.Grant.Kind), Issuer: cl.Grant.Issuer,
			Deliveries: cl.Deliveries, MaxDeliveries: cl.MaxDeliveries, VisibilityMs: visibility.Milliseconds(), Payload: string(cl.Payload),
		})
	}
	_, err := fmt.Fprintf(w, "%s: claimed item %d token %d (delivery %d of %d, visibility %v): %s\n",
		shown(cl.Queue), cl.Item, cl.Token, cl.Deliveries, cl.MaxDeliveries, visibility, shown(string(cl.Payload)))
	return err
}

func newQueueAckCommand(nack bool) *cobra.Command {
	var f clientFlags
	var token string
	var delay time.Duration
	use, short := "ack QUEUE ITEM --token T", "Report a claimed item done (it is removed)"
	if nack {
		use, short = "nack QUEUE ITEM --token T [--delay D]", "Give a claimed item back to the queue"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			item, err := strconv.ParseUint(args[1], 10, 64)
			if err != nil || item == 0 {
				return usageError("ITEM %q is not an item id (a positive integer)", args[1])
			}
			if token == "" {
				return usageError("no token: pass --token or set FENCED_TOKEN (fenced work sets it for CMD)")
			}
			tok, err := fence.ParseToken(token)
			if err != nil {
				return withExit(exitUsage, err)
			}
			if err := errors.Join(fsm.ValidateQueueName(args[0]), fsm.ValidateQueueDelayMillis(delay.Milliseconds())); err != nil {
				return withExit(exitUsage, err)
			}
			err = f.withClient(cmd.Context(), func(ctx context.Context, c *client.Client) error {
				q := client.NewQueue(c, args[0])
				if nack {
					return q.NackToken(ctx, item, tok, delay)
				}
				return q.AckToken(ctx, item, tok)
			})
			if errors.Is(err, fence.ErrStaleToken) {
				return withExit(exitStale, err)
			}
			if err != nil {
				return classify(err)
			}
			what := "acked"
			if nack {
				what = "nacked"
			}
			if f.json {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]string{"queue": args[0], "item": args[1], "token": tok.String(), "result": what})
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s/%d: %s (token %d)\n", shown(args[0]), item, what, tok)
			return err
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&token, "token", os.Getenv("FENCED_TOKEN"), "the claim token (env FENCED_TOKEN)")
	if nack {
		cmd.Flags().DurationVar(&delay, "delay", 0, "keep the item from being claimed again for this long (at most 12h)")
	}
	return cmd
}

func newQueueStatsCommand() *cobra.Command {
	var f clientFlags
	var items uint32
	cmd := &cobra.Command{
		Use:   "stats QUEUE",
		Short: "Print a queue's counts (and with --items N its first N items)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := fsm.ValidateQueueName(args[0]); err != nil {
				return withExit(exitUsage, err)
			}
			var st client.QueueStats
			err := f.withClient(cmd.Context(), func(ctx context.Context, c *client.Client) (err error) {
				st, err = client.NewQueue(c, args[0]).Stats(ctx, items, 0)
				return err
			})
			if err != nil {
				return classify(err)
			}
			w := cmd.OutOrStdout()
			if f.json {
				return json.NewEncoder(w).Encode(st)
			}
			dead := fmt.Sprintf(", %d dead-lettered (in %s%s)", st.Dead, shown(st.Queue), fsm.DeadLetterSuffix)
			if strings.HasSuffix(st.Queue, fsm.DeadLetterSuffix) {
				dead = " (a dead-letter queue)"
			}
			fmt.Fprintf(w, "%s: %d available, %d delayed, %d claimed, %d waiting claims%s, last item %d\n",
				shown(st.Queue), st.Available, st.Delayed, st.Claimed, st.Waiters, dead, st.LastItem)
			for _, it := range st.Items {
				state := "available"
				if !it.Claimed && it.AvailableAt.After(time.Now()) {
					state = "delayed until " + it.AvailableAt.Format(time.RFC3339)
				}
				if it.Claimed {
					state = fmt.Sprintf("claimed by session %d, token %d", it.Grant.Session, it.Grant.Token)
				}
				origin := ""
				if it.OriginItem != 0 {
					origin = fmt.Sprintf(", was item %d", it.OriginItem)
				}
				fmt.Fprintf(w, "  item %d: %s, %d deliveries%s: %s\n", it.Item, state, it.Deliveries, origin, shown(string(it.Payload)))
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().Uint32Var(&items, "items", 0, "list the first N items too (at most 1000)")
	return cmd
}

func newWorkCommand() *cobra.Command {
	var cf clientFlags
	var ttl, visibility, grace, nackDelay time.Duration
	var maxItems, batch int
	var ackWithClaim bool
	cmd := &cobra.Command{
		Use:   "work QUEUE [flags] -- CMD [ARGS...]",
		Short: "Run CMD for each item claimed from a queue",
		Long: `Claim items from QUEUE one at a time (waiting for each to be pushed) and run
CMD for each, with the payload on its standard input and FENCED_TOKEN (the
claim token), FENCED_ITEM, FENCED_QUEUE, FENCED_SCOPE (QUEUE/ITEM, the
object to fence) and FENCED_ISSUER in its environment. The claim is kept
alive (extended every --visibility/3) while CMD runs. When CMD exits 0 the
item is acked; otherwise it is nacked (back to the queue after
--nack-delay). When the claim is lost (an extend refused, or none confirmed
within the visibility timeout), fenced sends SIGTERM to CMD's process
group, SIGKILL after --grace, says which item and token were lost and goes
on with the next item; the item is another worker's now. CMD should send
FENCED_TOKEN with every write: a paused CMD cannot be stopped in time, the
token check at the resource is what rejects its late writes.

With --ack-with-claim (the default) the ack of an item whose CMD exited 0
rides the claim of the next item, one command instead of two
(ack-and-claim-next, docs/queue.md); the last item (--max-items) is acked
alone.

With --batch N (2 to 32) fenced claims up to N items at once, runs CMD
for each in turn (every claim is kept alive meanwhile), and acks those
whose CMD exited 0 with the claim of the next up to N: two commands per N
items. Items claimed but not yet run when fenced stops go back to the
queue when its session closes (one delivery counted).

With --max-items N fenced exits after N items (acked, nacked or lost).

Exit status: 0 done; 2 usage; 1 other error.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 || len(args) < 2 {
				return usageError("usage: fenced work QUEUE [flags] -- CMD [ARGS...]")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			name, argv := args[0], args[1:]
			if err := errors.Join(fsm.ValidateQueueName(name), fsm.ValidateVisibilityMillis(visibility.Milliseconds()), fence.ValidateTTL(ttl), fsm.ValidateQueueDelayMillis(nackDelay.Milliseconds())); err != nil {
				return withExit(exitUsage, err)
			}
			if grace < 0 || grace > maxTimeout {
				return usageError("--grace must be between 0 and %v, got %v", maxTimeout, grace)
			}
			if maxItems < 0 {
				return usageError("--max-items must not be negative, got %d", maxItems)
			}
			if batch < 1 || batch > fsm.MaxQueueBatch {
				return usageError("--batch %d is out of range; want 1 to %d", batch, fsm.MaxQueueBatch)
			}
			c, err := cf.client(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			if batch > 1 {
				return workBatch(cmd.Context(), cmd.ErrOrStderr(), c, cf.timeout, name, ttl, visibility, grace, nackDelay, maxItems, batch, argv)
			}
			return work(cmd.Context(), cmd.ErrOrStderr(), c, cf.timeout, name, ttl, visibility, grace, nackDelay, maxItems, ackWithClaim, argv)
		},
	}
	cf.register(cmd)
	cmd.Flags().DurationVar(&ttl, "ttl", 15*time.Second, "session TTL (100ms to 24h); renewed every TTL/3; the claims hang off the session")
	cmd.Flags().DurationVar(&visibility, "visibility", 30*time.Second, "each claim's visibility timeout (100ms to 12h); extended every third of it")
	cmd.Flags().DurationVar(&grace, "grace", 5*time.Second, "time between SIGTERM and SIGKILL when a claim is lost")
	cmd.Flags().DurationVar(&nackDelay, "nack-delay", 0, "when CMD fails, keep the item from being claimed again for this long")
	cmd.Flags().IntVar(&maxItems, "max-items", 0, "exit after this many items (0: run until interrupted)")
	cmd.Flags().IntVar(&batch, "batch", 1, "claim up to this many items at once (1 to 32; at most the server's --queue-max-batch) and ack them with the next claim")
	cmd.Flags().BoolVar(&ackWithClaim, "ack-with-claim", true, "ack an item in the same command as the next item's claim (false: a separate ack, as servers before ack-and-claim-next need)")
	return cmd
}

// work claims items of queue and runs argv for each until maxItems were
// handled or ctx ends.
func work(ctx context.Context, stderr io.Writer, c *client.Client, timeout time.Duration, queue string, ttl, visibility, grace, nackDelay time.Duration, maxItems int, ackWithClaim bool, argv []string) error {
	ctx, s, end, err := workSession(ctx, c, timeout, ttl)
	if err != nil {
		return err
	}
	defer end()
	q := client.NewQueue(c, queue)
	var done *client.Claim // CMD succeeded: acked with the next claim
	defer func() {
		if done != nil { // the claim did not answer: ack alone
			ackAlone(stderr, done)
		}
	}()
	for n := 0; maxItems == 0 || n < maxItems; n++ {
		var cl *client.Claim
		var err error
		if done != nil {
			var ackErr error
			cl, ackErr, err = done.AckAndClaimNext(ctx)
			switch {
			case ackErr == nil:
				done = nil
			case errors.Is(ackErr, fence.ErrStaleToken) || errors.Is(ackErr, fence.ErrInvalidArgument):
				fmt.Fprintf(stderr, "fenced: %s token %d: CMD succeeded but the ack was refused: %v\n", done.Scope, done.Token, ackErr)
				done = nil
			}
			// Otherwise the ack's outcome is unknown: the deferred ack
			// alone settles it.
		} else {
			cl, err = q.Claim(ctx, s, visibility)
		}
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return classify(err)
		}
		if done != nil {
			ackAlone(stderr, done)
			done = nil
		}
		more := maxItems == 0 || n+1 < maxItems
		if done, err = runItem(ctx, stderr, cl, grace, nackDelay, argv, ackWithClaim && more); err != nil {
			return err
		}
	}
	return nil
}

// ackAlone acks cl in a command of its own (CMD succeeded). A stale
// answer after an ack-and-claim-next whose answer was lost may be that
// ack's own.
// workSession opens the session of fenced work and returns it with the
// context that SIGINT and SIGTERM end (a running CMD gets them too); end
// stops listening and closes the session.
func workSession(ctx context.Context, c *client.Client, timeout, ttl time.Duration) (context.Context, *client.Session, func(), error) {
	sctx, cancel := context.WithTimeout(ctx, timeout)
	s, err := c.NewSession(sctx, client.WithTTL(ttl))
	cancel()
	if err != nil {
		return nil, nil, nil, classify(err)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	return ctx, s, func() {
		stop()
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Close(cctx)
	}, nil
}

// workBatch is work with --batch: it claims up to batch items at once,
// runs CMD for each in turn, and acks those whose CMD succeeded with the
// next claim (AckAndClaimNextBatch), or alone in one call at the end.
func workBatch(ctx context.Context, stderr io.Writer, c *client.Client, timeout time.Duration, queue string, ttl, visibility, grace, nackDelay time.Duration, maxItems, batch int, argv []string) error {
	ctx, s, end, err := workSession(ctx, c, timeout, ttl)
	if err != nil {
		return err
	}
	defer end()
	q := client.NewQueue(c, queue)
	var done []*client.Claim // CMD succeeded: acked with the next claim
	defer func() { ackAllAlone(stderr, q, done) }()
	for n := 0; maxItems == 0 || n < maxItems; {
		want := batch
		if maxItems > 0 {
			want = min(batch, maxItems-n)
		}
		var cls []*client.Claim
		if len(done) > 0 {
			var ackErrs []error
			cls, ackErrs, err = q.AckAndClaimNextBatch(ctx, s, visibility, want, done)
			var unknown []*client.Claim
			for i, ackErr := range ackErrs {
				switch {
				case ackErr == nil:
				case errors.Is(ackErr, fence.ErrStaleToken) || errors.Is(ackErr, fence.ErrInvalidArgument):
					fmt.Fprintf(stderr, "fenced: %s token %d: CMD succeeded but the ack was refused: %v\n", done[i].Scope, done[i].Token, ackErr)
				default:
					unknown = append(unknown, done[i]) // not known: acked alone below
				}
			}
			done = unknown
		} else {
			cls, err = q.ClaimBatch(ctx, s, visibility, want)
		}
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return classify(err)
		}
		ackAllAlone(stderr, q, done)
		done = nil
		for _, cl := range cls {
			n++
			d, err := runItem(ctx, stderr, cl, grace, nackDelay, argv, true)
			if err != nil {
				return err
			}
			if d != nil {
				done = append(done, d)
			}
			if ctx.Err() != nil {
				return nil
			}
		}
	}
	return nil
}

// ackAllAlone acks claims in one call (AckBatch), reporting each refused.
func ackAllAlone(stderr io.Writer, q *client.Queue, claims []*client.Claim) {
	if len(claims) == 0 {
		return
	}
	ectx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs, err := q.AckBatch(ectx, claims)
	for i, cl := range claims {
		e := err
		if e == nil {
			e = errs[i]
		}
		if e != nil {
			fmt.Fprintf(stderr, "fenced: %s token %d: CMD succeeded but the ack was refused: %v\n", cl.Scope, cl.Token, e)
		}
	}
}

func ackAlone(stderr io.Writer, cl *client.Claim) {
	ectx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if aerr := cl.Ack(ectx); aerr != nil {
		fmt.Fprintf(stderr, "fenced: %s token %d: CMD succeeded but the ack was refused: %v\n", cl.Scope, cl.Token, aerr)
	}
}

// runItem runs argv for one claim and acks, nacks or reports it lost.
// With ackLater, a claim whose CMD succeeded is returned not acked: the
// caller acks it with the next claim.
func runItem(ctx context.Context, stderr io.Writer, cl *client.Claim, grace, nackDelay time.Duration, argv []string, ackLater bool) (*client.Claim, error) {
	child := exec.Command(argv[0], argv[1:]...)
	child.Stdin, child.Stdout, child.Stderr = bytes.NewReader(cl.Payload), os.Stdout, os.Stderr
	child.Env = append(os.Environ(),
		"FENCED_TOKEN="+cl.Token.String(),
		"FENCED_ITEM="+strconv.FormatUint(cl.Item, 10),
		"FENCED_QUEUE="+cl.Queue,
		"FENCED_SCOPE="+cl.Scope,
		"FENCED_ISSUER="+cl.Grant.Issuer,
	)
	child.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := child.Start(); err != nil {
		cl.Nack(context.Background(), nackDelay)
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	end := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 10*time.Second)
	}
	select {
	case err := <-exited:
		ectx, cancel := end()
		defer cancel()
		if err == nil {
			if ackLater && ctx.Err() == nil {
				return cl, nil
			}
			ackAlone(stderr, cl)
			return nil, nil
		}
		fmt.Fprintf(stderr, "fenced: %s token %d: %s failed (%v); nacked\n", cl.Scope, cl.Token, argv[0], err)
		if nerr := cl.Nack(ectx, nackDelay); nerr != nil {
			fmt.Fprintf(stderr, "fenced: %s token %d: nack refused: %v\n", cl.Scope, cl.Token, nerr)
		}
		return nil, nil
	case <-ctx.Done():
		syscall.Kill(-child.Process.Pid, syscall.SIGTERM)
		<-exited
		ectx, cancel := end()
		defer cancel()
		cl.Nack(ectx, 0)
		return nil, nil
	case <-cl.Done():
		fmt.Fprintf(stderr, "fenced: claim of %s lost (token %d): %v; stopping %s\n", cl.Scope, cl.Token, context.Cause(cl.Context()), argv[0])
		stopGroup(child.Process.Pid, exited, grace)
		return nil, nil
	}
}
