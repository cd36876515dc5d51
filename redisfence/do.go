package redisfence

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	fence "github.com/fenced-dev/fenced"
)

// maxTxAttempts bounds how often Do runs its transaction again after the
// watermark changed between its read and EXEC.
const maxTxAttempts = 100

// watcher is what Do needs of a client besides scripts: WATCH transactions
// and a pipeline to collect apply's commands in. *redis.Client,
// *redis.ClusterClient and *redis.Ring have both.
type watcher interface {
	Watch(ctx context.Context, fn func(*redis.Tx) error, keys ...string) error
	Pipeline() redis.Pipeliner
}

// ErrQueueExec reports that apply tried to run the commands it queued
// itself (Exec, Pipelined or TxPipelined on the Pipeliner of
// PipelinerFromContext). Do runs them, after the check, in its transaction.
var ErrQueueExec = errors.New("redisfence: the fenced step runs the queued commands; apply must not call Exec, Pipelined or TxPipelined")

// pipelinerKey is the context key of the queue Do gives apply.
type pipelinerKey struct{}

// PipelinerFromContext returns the Pipeliner that the apply of Guard.Do
// (and guard.Do, or the httpfence and grpcfence handlers behind a Guard)
// queues its commands on; ok is false for any other context. Its commands
// run in Do's transaction, after the token check, and their Cmd values
// hold the replies once Do has returned nil. Calling Exec on it fails with
// ErrQueueExec.
func PipelinerFromContext(ctx context.Context) (pipe redis.Pipeliner, ok bool) {
	pipe, ok = ctx.Value(pipelinerKey{}).(redis.Pipeliner)
	return pipe, ok
}

// queue is the Pipeliner apply gets: it collects commands for Do's
// transaction and refuses to run them itself, which would run them outside
// the fenced step.
type queue struct{ redis.Pipeliner }

// Exec refuses: Do runs the queued commands.
func (queue) Exec(context.Context) ([]redis.Cmder, error) { return nil, ErrQueueExec }

// Pipelined refuses: Do runs the queued commands.
func (queue) Pipelined(context.Context, func(redis.Pipeliner) error) ([]redis.Cmder, error) {
	return nil, ErrQueueExec
}

// TxPipelined refuses: Do runs the queued commands.
func (queue) TxPipelined(context.Context, func(redis.Pipeliner) error) ([]redis.Cmder, error) {
	return nil, ErrQueueExec
}

// Pipeline returns the queue itself.
func (q queue) Pipeline() redis.Pipeliner { return q }

// TxPipeline returns the queue itself.
func (q queue) TxPipeline() redis.Pipeliner { return q }

// Do implements fence.Guard for the key object. Redis has no transaction
// that reads and then decides, so the fenced step is an optimistic one:
//
//  1. WATCH the key's watermark key and GET it; a token below it is
//     rejected with a *fence.StaleTokenError and apply is not called;
//  2. apply(ctx) queues its commands on the Pipeliner of
//     PipelinerFromContext(ctx), without running them;
//  3. MULTI, the queued commands, SET of the watermark key to t when t is
//     above the watermark, EXEC.
//
// EXEC runs the commands with no other client's command in between, and
// only if the watermark key was not written since step 1 (WATCH); if it
// was, Do reads the watermark again and runs the same queued commands again
// (apply is called once), until the token is rejected (the queued commands
// are then dropped, never sent) or the transaction commits. So the check, the commands and the raise are one atomic step
// against every other Do, Set, HSet, Del, Script and Check on the key.
//
// What apply may do: queue commands, and nothing it needs to read before
// deciding what to write (queued reads reply only after EXEC; a read-
// modify-write belongs in a Script). It must not run the queue itself
// (ErrQueueExec). On Redis Cluster every queued key must be in object's
// hash slot: give the keys object's hash tag. When apply returns an error,
// nothing was sent and Do returns that error unchanged. A nil apply makes
// Do a bare check (Check), one script on any client.
//
// Redis does not roll back a transaction: a queued command that fails as
// EXEC runs it (WRONGTYPE, say) does not stop the others nor the raise of
// the watermark, and Do returns the first such failure. A command Redis
// refuses to queue (an unknown command, a wrong number of arguments, a key
// in another slot) aborts the whole transaction: nothing is applied.
//
// Do with an apply needs a client that runs WATCH transactions: a
// *redis.Client, *redis.ClusterClient or *redis.Ring; with any other
// redis.Scripter it fails with an error matching fence.ErrInvalidArgument.
// An invalid token or issuer is refused before Redis is asked
// (guard.Admit).
func (g *Guard) Do(ctx context.Context, object string, t fence.Token, apply func(ctx context.Context) error) error {
	if apply == nil {
		_, err := g.run(ctx, "check", checkScript, object, t)
		return err
	}
	if err := g.admit(ctx, object, t); err != nil {
		return err
	}
	w, ok := g.rdb.(watcher)
	if !ok {
		return fmt.Errorf("%w: redisfence: Do with an apply needs a client that runs WATCH transactions (*redis.Client, *redis.ClusterClient or *redis.Ring), not a %T", fence.ErrInvalidArgument, g.rdb)
	}
	wkey := WatermarkKey(object)
	var cmds []redis.Cmder
	var applyErr error
	applied := false
	for range maxTxAttempts {
		err := w.Watch(ctx, func(tx *redis.Tx) error {
			s, err := tx.Get(ctx, wkey).Result()
			mark, err := parseMark(object, s, err)
			if err != nil {
				return err
			}
			next, err := fence.Decide(object, mark, t)
			if err != nil {
				return err
			}
			if !applied {
				applied = true
				q := w.Pipeline()
				if applyErr = apply(context.WithValue(ctx, pipelinerKey{}, queue{q})); applyErr != nil {
					return applyErr
				}
				cmds = q.Cmds()
			}
			if len(cmds) == 0 && next == mark {
				return nil // nothing to write: the check alone
			}
			_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
				if err := pipe.BatchProcess(ctx, cmds...); err != nil {
					return err
				}
				if next != mark {
					pipe.Set(ctx, wkey, next.String(), 0)
				}
				return nil
			})
			return err
		}, wkey)
		switch {
		case applyErr != nil:
			return applyErr
		case errors.Is(err, redis.TxFailedErr):
			continue // the watermark moved: check again
		case err == nil:
			return nil
		}
		var se *fence.StaleTokenError
		if errors.As(err, &se) || errors.Is(err, ErrCorruptWatermark) {
			return err
		}
		return fmt.Errorf("redisfence: do %q: %w", object, err)
	}
	return fmt.Errorf("redisfence: do %q: the watermark changed concurrently %d times; try again", object, maxTxAttempts)
}
