package redisfence

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
)

// ErrCorruptWatermark reports a watermark key that holds something other
// than a token (1 to fence.MaxToken in decimal): it was written by someone
// else. The guard refuses every write to the key until the watermark key is
// repaired by hand; it never guesses.
var ErrCorruptWatermark = errors.New("redisfence: watermark key does not hold a token")

// Guard makes fenced writes to Redis keys. Set, HSet, Del, Check and
// Script.Run are each one Lua script that checks the presented token
// against the key's watermark, writes, and raises the watermark,
// atomically: no other command runs in between. Guard is also a
// fence.Guard: Do runs the commands a function queues in a MULTI/EXEC
// transaction guarded by WATCH on the watermark (see Do), so the httpfence
// middleware and the grpcfence interceptors take a Guard directly.
//
// A Guard is safe for concurrent use. Its methods return an error matching
// fence.ErrInvalidToken for a token outside 1..fence.MaxToken and a
// *fence.StaleTokenError (matching fence.ErrStaleToken) for a token below
// the key's watermark; in both cases nothing was changed. With WithIssuer,
// a token from another issuer is rejected with fence.ErrIssuerMismatch
// before Redis is asked.
//
// When a method returns another error (network, timeout) the script may or
// may not have run; retrying with the same token is safe, since an equal
// token is accepted.
type Guard struct {
	rdb    redis.Scripter
	issuer string
}

var _ fence.Guard = (*Guard)(nil)

// Option configures a Guard.
type Option func(*Guard)

// WithIssuer pins the guard to the fenced cluster with the given issuer ID:
// every call first checks, with guard.CheckIssuer, that the issuer presented
// in its context (guard.ContextWithIssuer) is id, and fails with an error
// matching fence.ErrIssuerMismatch otherwise. Tokens of two clusters are not
// comparable. An empty id accepts every issuer, as without the option.
func WithIssuer(id string) Option {
	return func(g *Guard) { g.issuer = id }
}

// New returns a Guard that runs its scripts on rdb: a *redis.Client, a
// *redis.ClusterClient, a *redis.Ring or any other redis.Scripter that runs
// each command on its own (not a pipeline or a transaction, where the
// EVALSHA-to-EVAL fallback cannot work). Scripts run with EVALSHA and are
// sent in full only when the server does not have them cached.
func New(rdb redis.Scripter, opts ...Option) *Guard {
	g := &Guard{rdb: rdb}
	for _, opt := range opts {
		opt(g)
	}
	return g
}

// Check applies the watermark rule to the key object and raises its
// watermark, without touching the key itself: Do without an apply, one
// script. Use it to claim a key before writes the Guard has no method for,
// knowing that the claim and the later write are two steps: prefer Do or
// Eval.
func (g *Guard) Check(ctx context.Context, object string, t fence.Token) error {
	return g.Do(ctx, object, t, nil)
}

// Watermark returns the highest token accepted for key, or 0 when none has
// been.
func (g *Guard) Watermark(ctx context.Context, key string) (fence.Token, error) {
	s, err := watermarkScript.Run(ctx, g.rdb, []string{WatermarkKey(key)}).Text()
	return parseMark(key, s, err)
}

// parseMark returns the watermark of key from the reply s, err to a read
// of its watermark key: 0 when there is none (redis.Nil),
// ErrCorruptWatermark when the watermark key holds something other than a
// token.
func parseMark(key, s string, err error) (fence.Token, error) {
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("redisfence: watermark of %q: %w", key, err)
	}
	t, err := fence.ParseToken(s)
	if err != nil || t.String() != s {
		return 0, fmt.Errorf("%w: key %q holds %q", ErrCorruptWatermark, WatermarkKey(key), s)
	}
	return t, nil
}

// admit runs the checks made in Go, before Redis is asked: the issuer and
// the token's range (guard.Admit; every key is a valid object).
func (g *Guard) admit(ctx context.Context, key string, t fence.Token) error {
	return guard.Admit(ctx, g.issuer, key, t, nil)
}

// run admits t, then runs script with the protected key and its watermark
// key as KEYS and t followed by args as ARGV, and maps the script's fenced
// errors. op names the call in wrapped errors.
func (g *Guard) run(ctx context.Context, op string, script *redis.Script, key string, t fence.Token, args ...any) (any, error) {
	if err := g.admit(ctx, key, t); err != nil {
		return nil, err
	}
	argv := append([]any{t.String()}, args...)
	v, err := script.Run(ctx, g.rdb, []string{key, WatermarkKey(key)}, argv...).Result()
	if err != nil {
		if ferr := fencedError(key, t, err); ferr != nil {
			return nil, ferr
		}
		return nil, fmt.Errorf("redisfence: %s %q: %w", op, key, err)
	}
	return v, nil
}

// fencedError maps the errors the scripts raise themselves (FENCED_STALE,
// FENCED_CORRUPT) to the package's errors, and returns nil for any other.
func fencedError(key string, t fence.Token, err error) error {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return nil
	}
	msg := rerr.Error()
	if s, ok := strings.CutPrefix(msg, "FENCED_STALE "); ok {
		mark, perr := strconv.ParseUint(s, 10, 64)
		if perr != nil {
			return fmt.Errorf("%w: key %q: %s", ErrCorruptWatermark, WatermarkKey(key), msg)
		}
		return &fence.StaleTokenError{Object: key, Presented: t, Required: fence.Token(mark)}
	}
	if strings.HasPrefix(msg, "FENCED_CORRUPT") {
		return fmt.Errorf("%w: key %q", ErrCorruptWatermark, WatermarkKey(key))
	}
	return nil
}
