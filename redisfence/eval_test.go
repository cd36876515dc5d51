package redisfence_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/redisfence"
)

func TestScript_Run(t *testing.T) {
	rdb := newClient(t)
	g := redisfence.New(rdb)
	tag := uniqueKey(t, "")
	key, extra := "{"+tag+"}:doc", "{"+tag+"}:log"

	// The body sees the protected key first, then the extra keys, the
	// caller's args without the token, and the token on its own.
	show := redisfence.NewScript(`return {KEYS[1], KEYS[2], #KEYS, ARGV[1], ARGV[2], #ARGV, FENCING_TOKEN}`)
	got, err := show.Run(ctx(t), g, key, 42, []string{extra}, "x", 7).Slice()
	if err != nil {
		t.Fatal(err)
	}
	want := []any{key, extra, int64(2), "x", "7", int64(2), "42"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the body saw %v, want %v", got, want)
	}
	wantMark(t, g, key, 42)

	// A stale token: the body does not run.
	write := redisfence.NewScript(`redis.call('RPUSH', KEYS[2], ARGV[1]); return redis.call('SET', KEYS[1], ARGV[1])`)
	if err := write.Run(ctx(t), g, key, 50, []string{extra}, "v50").Err(); err != nil {
		t.Fatal(err)
	}
	err = write.Run(ctx(t), g, key, 43, []string{extra}, "v43").Err()
	wantStale(t, err, 43, 50)
	wantValue(t, rdb, key, "v50")
	if n := rdb.LLen(ctx(t), extra).Val(); n != 1 {
		t.Fatalf("LLEN %s=%d, want 1: a stale script ran", extra, n)
	}

	// The reply passes through: a status, nil as redis.Nil.
	if s, err := write.Run(ctx(t), g, key, 50, []string{extra}, "again").Text(); err != nil || s != "OK" {
		t.Fatalf("reply=%q, %v; want OK", s, err)
	}
	if err := g.Eval(ctx(t), `local x = 1`, key, 50, nil).Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("a body that returns nothing: %v, want redis.Nil", err)
	}

	// The body cannot see the check's locals.
	err = g.Eval(ctx(t), `return fenced_token`, key, 50, nil).Err()
	if err == nil || !strings.Contains(err.Error(), "fenced_token") {
		t.Fatalf("a body reading fenced_token: %v, want a Lua error", err)
	}
}

func TestScript_RunErrors(t *testing.T) {
	rdb := newClient(t)
	g := redisfence.New(rdb)
	key := uniqueKey(t, "")

	// A body that fails half-way: Redis keeps what it wrote, and the raised
	// watermark with it, so an older token cannot overwrite it.
	fail := redisfence.NewScript("redis.call('SET', KEYS[1], 'half')\nreturn redis.call('INCR', KEYS[1])")
	err := fail.Run(ctx(t), g, key, 8, nil).Err()
	var rerr redis.Error
	if !errors.As(err, &rerr) || !strings.Contains(err.Error(), "not an integer") {
		t.Fatalf("failing body: %v, want the Redis error", err)
	}
	if !strings.Contains(err.Error(), ":2") {
		t.Errorf("error %q does not carry the body's own line number 2", err)
	}
	wantValue(t, rdb, key, "half")
	wantMark(t, g, key, 8)
	wantStale(t, g.Set(ctx(t), key, 7, "older", 0), 7, 8)

	// A syntax error is reported, and nothing changes.
	syntax := uniqueKey(t, "syntax-")
	if err := g.Eval(ctx(t), `return (`, syntax, 3, nil).Err(); err == nil {
		t.Fatal("a syntax error was not reported")
	}
	wantMark(t, g, syntax, 0)

	// A shebang would set flags for the whole wrapped script.
	if err := g.Eval(ctx(t), "#!lua flags=no-writes\nreturn 1", key, 9, nil).Err(); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Fatalf("shebang: %v, want fence.ErrInvalidArgument", err)
	}
	wantMark(t, g, key, 8)
}

func TestScript_Source(t *testing.T) {
	const src = `return 1`
	if got := redisfence.NewScript(src).Source(); got != src {
		t.Fatalf("Source()=%q, want %q", got, src)
	}
}
