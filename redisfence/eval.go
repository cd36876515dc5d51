package redisfence

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	fence "github.com/fenced-dev/fenced"
)

// Script is a caller's Lua script that runs only after the token check, in
// the same EVAL: the check, the raise of the watermark and everything the
// script does are one atomic step. Create it once with NewScript, as with
// redis.NewScript, and run it with Run; it is safe for concurrent use.
//
// The source is the body of a Lua function, called as
//
//	fenced_body(KEYS, ARGV, FENCING_TOKEN)
//
// where KEYS[1] is the protected key, KEYS[2], ... are the extra keys given
// to Run, ARGV holds Run's args (the token is not among them) and
// FENCING_TOKEN is the presented token as a decimal string. Whatever it
// returns is the script's reply. Constraints:
//
//   - It must be a valid function body: what is valid as an EVAL script is,
//     except the "#!lua" shebang (flags cannot be set) and the vararg "...".
//     Lua error messages carry the source's own line numbers.
//   - It must touch only the keys it is given. On Redis Cluster every extra
//     key must hash to the protected key's slot: give them the key's hash
//     tag. The watermark key is declared too, so it routes with them.
//   - It must not write the watermark key (WatermarkKey), and it must not
//     return an error whose message starts with FENCED_STALE or
//     FENCED_CORRUPT: those are the guard's.
//   - It is trusted code: a source that closes the function body ("end")
//     and goes on at the top level runs before the check.
//
// The watermark is raised before the body runs. Redis does not roll a
// script back: if the body fails half-way, the writes it made before the
// error stay, and so does the raised watermark, so no writer with an older
// token can overwrite them.
type Script struct {
	src    string
	script *redis.Script
}

// NewScript wraps src, the body of a Lua function (see Script), into a
// fenced script. It does not contact Redis; errors in src are reported by
// Run.
func NewScript(src string) *Script {
	return &Script{src: src, script: redis.NewScript(evalPrefix + src + evalSuffix)}
}

// Source returns the caller's source given to NewScript.
func (s *Script) Source() string { return s.src }

// Run runs the script through g against key with token t: if t is not
// below key's watermark the watermark is raised to t and the body runs with
// KEYS = key followed by keys, and ARGV = args. It returns the reply as a
// *redis.Cmd, so go-redis's accessors (Int64, Text, Slice, ...) read it.
// The Cmd's error is a *fence.StaleTokenError when t is stale, matches
// fence.ErrInvalidToken or fence.ErrIssuerMismatch when the token is not
// admitted, and fence.ErrInvalidArgument for a source with a shebang (in
// all these cases the body did not run); otherwise it is the script's
// own Redis error, unwrapped, otherwise; a body that returns nothing yields
// redis.Nil, as EVAL does.
func (s *Script) Run(ctx context.Context, g *Guard, key string, t fence.Token, keys []string, args ...any) *redis.Cmd {
	if strings.HasPrefix(s.src, "#!") {
		return errCmd(ctx, fmt.Errorf("%w: a fenced script cannot start with a shebang: its flags would apply to the whole wrapped script", fence.ErrInvalidArgument))
	}
	if err := g.admit(ctx, key, t); err != nil {
		return errCmd(ctx, err)
	}
	allKeys := append([]string{key, WatermarkKey(key)}, keys...)
	argv := append([]any{t.String()}, args...)
	cmd := s.script.Run(ctx, g.rdb, allKeys, argv...)
	if ferr := fencedError(key, t, cmd.Err()); ferr != nil {
		return errCmd(ctx, ferr)
	}
	return cmd
}

// Eval is NewScript(src).Run(ctx, g, key, t, keys, args...): it runs src,
// the body of a Lua function (see Script), after the token check, in one
// script. Scripts run often should be created once with NewScript.
func (g *Guard) Eval(ctx context.Context, src, key string, t fence.Token, keys []string, args ...any) *redis.Cmd {
	return NewScript(src).Run(ctx, g, key, t, keys, args...)
}

// errCmd returns a Cmd that failed with err before reaching Redis.
func errCmd(ctx context.Context, err error) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(err)
	return cmd
}
