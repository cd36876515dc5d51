package redisfence_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
	"github.com/fenced-dev/fenced/guard/guardtest"
	"github.com/fenced-dev/fenced/redisfence"
)

// setTarget writes with Guard.Set (which replaces the value).
type setTarget struct {
	g   *redisfence.Guard
	rdb redis.Cmdable
}

func (s setTarget) Write(ctx context.Context, object string, t fence.Token, value string) error {
	return s.g.Set(ctx, object, t, value, 0)
}

func (s setTarget) Read(ctx context.Context, object string) (string, fence.Token, error) {
	v, err := s.rdb.Get(ctx, object).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", 0, err
	}
	mark, err := s.g.Watermark(ctx, object)
	return v, mark, err
}

// hsetTarget writes field "v" with Guard.HSet.
type hsetTarget struct {
	g   *redisfence.Guard
	rdb redis.Cmdable
}

func (h hsetTarget) Write(ctx context.Context, object string, t fence.Token, value string) error {
	_, err := h.g.HSet(ctx, object, t, "v", value)
	return err
}

func (h hsetTarget) Read(ctx context.Context, object string) (string, fence.Token, error) {
	v, err := h.rdb.HGet(ctx, object, "v").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", 0, err
	}
	mark, err := h.g.Watermark(ctx, object)
	return v, mark, err
}

// appendScript appends ARGV[1] to the key, comma-separated.
var appendScript = redisfence.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('APPEND', KEYS[1], ',') end
return redis.call('APPEND', KEYS[1], ARGV[1])`)

// appendTarget writes with a fenced script that appends, so the stored
// value records the commit order.
type appendTarget struct{ setTarget }

func (a appendTarget) Write(ctx context.Context, object string, t fence.Token, value string) error {
	return appendScript.Run(ctx, a.g, object, t, nil, value).Err()
}

func (a appendTarget) Appends() bool { return true }

var _ guardtest.Appender = appendTarget{}

func TestGuard_Conformance(t *testing.T) {
	rdb := newClient(t)
	g := redisfence.New(rdb)
	t.Run("Set", func(t *testing.T) {
		guardtest.Run(t, func(t *testing.T) guardtest.Target { return setTarget{g, rdb} })
	})
	t.Run("HSet", func(t *testing.T) {
		guardtest.Run(t, func(t *testing.T) guardtest.Target { return hsetTarget{g, rdb} })
	})
	t.Run("EvalAppend", func(t *testing.T) {
		guardtest.Run(t, func(t *testing.T) guardtest.Target { return appendTarget{setTarget{g, rdb}} })
	})
}

// TestGuard_ConformanceCluster runs the suite through a ClusterClient
// against a cluster-mode server, which rejects a script whose keys are in
// different slots.
func TestGuard_ConformanceCluster(t *testing.T) {
	rdb := newClusterClient(t)
	g := redisfence.New(rdb)
	t.Run("Set", func(t *testing.T) {
		guardtest.Run(t, func(t *testing.T) guardtest.Target { return setTarget{g, rdb} })
	})
	t.Run("EvalAppend", func(t *testing.T) {
		guardtest.Run(t, func(t *testing.T) guardtest.Target { return appendTarget{setTarget{g, rdb}} })
	})
}

func wantStale(t *testing.T, err error, presented, required fence.Token) {
	t.Helper()
	var se *fence.StaleTokenError
	if !errors.As(err, &se) || !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("err=%v, want a *fence.StaleTokenError", err)
	}
	if se.Presented != presented || se.Required != required {
		t.Fatalf("StaleTokenError{Presented: %d, Required: %d}, want {%d, %d}", se.Presented, se.Required, presented, required)
	}
}

func wantMark(t *testing.T, g *redisfence.Guard, key string, want fence.Token) {
	t.Helper()
	got, err := g.Watermark(ctx(t), key)
	if err != nil || got != want {
		t.Fatalf("Watermark(%q)=%d, %v; want %d", key, got, err, want)
	}
}

func wantValue(t *testing.T, rdb redis.Cmdable, key, want string) {
	t.Helper()
	got, err := rdb.Get(ctx(t), key).Result()
	if errors.Is(err, redis.Nil) {
		got, err = "", nil
	}
	if err != nil || got != want {
		t.Fatalf("GET %q=%q, %v; want %q", key, got, err, want)
	}
}

func TestGuard_Del(t *testing.T) {
	rdb := newClient(t)
	g := redisfence.New(rdb)
	key := uniqueKey(t, "")
	if err := g.Set(ctx(t), key, 5, "v5", 0); err != nil {
		t.Fatal(err)
	}
	_, err := g.Del(ctx(t), key, 3)
	wantStale(t, err, 3, 5)
	wantValue(t, rdb, key, "v5")

	if n, err := g.Del(ctx(t), key, 7); err != nil || n != 1 {
		t.Fatalf("Del(7)=%d, %v; want 1", n, err)
	}
	wantValue(t, rdb, key, "")
	wantMark(t, g, key, 7)

	// The watermark survives the deletion: a stale writer cannot recreate
	// the key.
	wantStale(t, g.Set(ctx(t), key, 6, "stale", 0), 6, 7)
	if n, _ := rdb.Exists(ctx(t), key).Result(); n != 0 {
		t.Fatal("a stale Set recreated the deleted key")
	}
	if err := g.Set(ctx(t), key, 7, "v7", 0); err != nil {
		t.Fatalf("Set(7) after Del(7)=%v, want accepted", err)
	}

	// Deleting a missing key still raises its watermark.
	missing := uniqueKey(t, "missing-")
	if n, err := g.Del(ctx(t), missing, 9); err != nil || n != 0 {
		t.Fatalf("Del(missing, 9)=%d, %v; want 0", n, err)
	}
	wantMark(t, g, missing, 9)
}

func TestGuard_HSet(t *testing.T) {
	rdb := newClient(t)
	g := redisfence.New(rdb)
	key := uniqueKey(t, "")
	if n, err := g.HSet(ctx(t), key, 4, "a", "1", "b", 2); err != nil || n != 2 {
		t.Fatalf("HSet(pairs)=%d, %v; want 2", n, err)
	}
	if n, err := g.HSet(ctx(t), key, 4, map[string]any{"b": "3", "c": 4}); err != nil || n != 1 {
		t.Fatalf("HSet(map)=%d, %v; want 1 added", n, err)
	}
	if n, err := g.HSet(ctx(t), key, 5, map[string]string{"d": "x"}); err != nil || n != 1 {
		t.Fatalf("HSet(map[string]string)=%d, %v; want 1 added", n, err)
	}
	got, _ := rdb.HGetAll(ctx(t), key).Result()
	if got["a"] != "1" || got["b"] != "3" || got["c"] != "4" || got["d"] != "x" || len(got) != 4 {
		t.Fatalf("HGETALL=%v", got)
	}
	_, err := g.HSet(ctx(t), key, 2, "a", "stale")
	wantStale(t, err, 2, 5)
	if v, _ := rdb.HGet(ctx(t), key, "a").Result(); v != "1" {
		t.Fatalf("a stale HSet changed field a to %q", v)
	}

	// Many fields: sent to HSET in chunks.
	big := uniqueKey(t, "big-")
	var fv []any
	for i := 0; i < 5001; i++ {
		fv = append(fv, i, i*2)
	}
	if n, err := g.HSet(ctx(t), big, 1, fv...); err != nil || n != 5001 {
		t.Fatalf("HSet(5001 fields)=%d, %v", n, err)
	}

	for _, bad := range [][]any{nil, {"a"}, {"a", 1, "b"}, {42}} {
		if _, err := g.HSet(ctx(t), key, 9, bad...); !errors.Is(err, fence.ErrInvalidArgument) {
			t.Errorf("HSet(%v)=%v, want fence.ErrInvalidArgument", bad, err)
		}
	}
	wantMark(t, g, key, 5)

	// HSET on a string fails with WRONGTYPE and changes nothing, not even
	// the watermark.
	str := uniqueKey(t, "str-")
	if err := g.Set(ctx(t), str, 3, "s", 0); err != nil {
		t.Fatal(err)
	}
	_, err = g.HSet(ctx(t), str, 8, "f", "v")
	if !redis.HasErrorPrefix(err, "WRONGTYPE") {
		t.Fatalf("HSet on a string=%v, want WRONGTYPE", err)
	}
	wantMark(t, g, str, 3)
	wantValue(t, rdb, str, "s")
}

func TestGuard_SetTTL(t *testing.T) {
	rdb := newClient(t)
	g := redisfence.New(rdb)
	key := uniqueKey(t, "")
	if err := g.Set(ctx(t), key, 1, "v", time.Hour); err != nil {
		t.Fatal(err)
	}
	if ttl, _ := rdb.PTTL(ctx(t), key).Result(); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Fatalf("PTTL=%v, want about 1h", ttl)
	}
	if err := g.Set(ctx(t), key, 2, "w", redis.KeepTTL); err != nil {
		t.Fatal(err)
	}
	if ttl, _ := rdb.PTTL(ctx(t), key).Result(); ttl <= 59*time.Minute {
		t.Fatalf("PTTL after KeepTTL=%v, want the old TTL kept", ttl)
	}
	if err := g.Set(ctx(t), key, 2, "x", 0); err != nil {
		t.Fatal(err)
	}
	if ttl, _ := rdb.PTTL(ctx(t), key).Result(); ttl != -1 {
		t.Fatalf("PTTL after Set with ttl 0=%v, want no expiry", ttl)
	}
	// The watermark key never expires.
	if ttl, _ := rdb.PTTL(ctx(t), redisfence.WatermarkKey(key)).Result(); ttl != -1 {
		t.Fatalf("PTTL of the watermark key=%v, want no expiry", ttl)
	}
	for _, bad := range []time.Duration{-2, time.Microsecond, -time.Second} {
		if err := g.Set(ctx(t), key, 3, "bad", bad); !errors.Is(err, fence.ErrInvalidArgument) {
			t.Errorf("Set(ttl %v)=%v, want fence.ErrInvalidArgument", bad, err)
		}
	}
	wantValue(t, rdb, key, "x")
	wantMark(t, g, key, 2)

	// An expired key keeps its watermark.
	short := uniqueKey(t, "short-")
	if err := g.Set(ctx(t), short, 10, "v", time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for rdb.Exists(ctx(t), short).Val() == 1 {
		time.Sleep(time.Millisecond)
	}
	wantStale(t, g.Set(ctx(t), short, 9, "stale", 0), 9, 10)
}

func TestGuard_Check(t *testing.T) {
	rdb := newClient(t)
	g := redisfence.New(rdb)
	key := uniqueKey(t, "")
	if err := g.Check(ctx(t), key, 12); err != nil {
		t.Fatal(err)
	}
	wantMark(t, g, key, 12)
	if n, _ := rdb.Exists(ctx(t), key).Result(); n != 0 {
		t.Fatal("Check created the protected key")
	}
	if err := g.Check(ctx(t), key, 12); err != nil {
		t.Fatalf("Check(equal token)=%v", err)
	}
	wantStale(t, g.Check(ctx(t), key, 11), 11, 12)
	wantStale(t, g.Set(ctx(t), key, 11, "v", 0), 11, 12)
}

// TestGuard_LargeTokens checks tokens above 2^53, which a Lua number (a
// double) cannot tell apart: the scripts compare decimal strings.
func TestGuard_LargeTokens(t *testing.T) {
	rdb := newClient(t)
	g := redisfence.New(rdb)
	key := uniqueKey(t, "")
	const big = fence.Token(1<<53 + 1)
	if err := g.Set(ctx(t), key, big, "a", 0); err != nil {
		t.Fatal(err)
	}
	wantStale(t, g.Set(ctx(t), key, big-1, "b", 0), big-1, big)
	wantStale(t, g.Set(ctx(t), key, 99, "b", 0), 99, big)
	if err := g.Set(ctx(t), key, big+1, "c", 0); err != nil {
		t.Fatal(err)
	}
	wantMark(t, g, key, big+1)
	if err := g.Set(ctx(t), key, fence.MaxToken, "d", 0); err != nil {
		t.Fatal(err)
	}
	wantStale(t, g.Set(ctx(t), key, fence.MaxToken-1, "e", 0), fence.MaxToken-1, fence.MaxToken)
	wantValue(t, rdb, key, "d")
}

// ops are the guard's fenced calls, each writing something visible to key.
var ops = []struct {
	name string
	do   func(ctx context.Context, g *redisfence.Guard, key string, t fence.Token) error
}{
	{"Set", func(ctx context.Context, g *redisfence.Guard, key string, t fence.Token) error {
		return g.Set(ctx, key, t, "changed", 0)
	}},
	{"HSet", func(ctx context.Context, g *redisfence.Guard, key string, t fence.Token) error {
		_, err := g.HSet(ctx, key+":h", t, "f", "changed")
		return err
	}},
	{"Del", func(ctx context.Context, g *redisfence.Guard, key string, t fence.Token) error {
		_, err := g.Del(ctx, key, t)
		return err
	}},
	{"Eval", func(ctx context.Context, g *redisfence.Guard, key string, t fence.Token) error {
		return g.Eval(ctx, `return redis.call('SET', KEYS[1], 'changed')`, key, t, nil).Err()
	}},
	{"Check", func(ctx context.Context, g *redisfence.Guard, key string, t fence.Token) error {
		return g.Check(ctx, key, t)
	}},
}

func TestGuard_InvalidTokens(t *testing.T) {
	rdb := newClient(t)
	g := redisfence.New(rdb)
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			key := uniqueKey(t, "")
			if err := g.Set(ctx(t), key, 10, "orig", 0); err != nil {
				t.Fatal(err)
			}
			for _, tok := range []fence.Token{0, fence.MaxToken + 1, ^fence.Token(0)} {
				if err := op.do(ctx(t), g, key, tok); !errors.Is(err, fence.ErrInvalidToken) {
					t.Errorf("%s(token %d)=%v, want fence.ErrInvalidToken", op.name, uint64(tok), err)
				}
				wantValue(t, rdb, key, "orig")
				wantMark(t, g, key, 10)
				if n := rdb.Exists(ctx(t), key+":h", redisfence.WatermarkKey(key+":h")).Val(); n != 0 {
					t.Errorf("%s(token %d) created keys", op.name, uint64(tok))
				}
			}
		})
	}
}

func TestGuard_Issuer(t *testing.T) {
	rdb := newClient(t)
	g := redisfence.New(rdb, redisfence.WithIssuer("cluster-a"))
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			key := uniqueKey(t, "")
			for _, c := range []context.Context{ctx(t), guard.ContextWithIssuer(ctx(t), "cluster-b")} {
				if err := op.do(c, g, key, 5); !errors.Is(err, fence.ErrIssuerMismatch) {
					t.Fatalf("%s with issuer %q=%v, want fence.ErrIssuerMismatch", op.name, guard.IssuerFromContext(c), err)
				}
				if n := rdb.Exists(ctx(t), key, redisfence.WatermarkKey(key), key+":h").Val(); n != 0 {
					t.Fatalf("%s with issuer %q changed Redis", op.name, guard.IssuerFromContext(c))
				}
			}
			if err := op.do(guard.ContextWithIssuer(ctx(t), "cluster-a"), g, key, 5); err != nil {
				t.Fatalf("%s with the pinned issuer=%v", op.name, err)
			}
		})
	}
}

func TestGuard_CorruptWatermark(t *testing.T) {
	rdb := newClient(t)
	g := redisfence.New(rdb)
	for _, bad := range []string{"abc", "0", "-1", "007", "9223372036854775808", "99999999999999999999", ""} {
		key := uniqueKey(t, "")
		rdb.Set(ctx(t), redisfence.WatermarkKey(key), bad, 0)
		if err := g.Set(ctx(t), key, 5, "v", 0); !errors.Is(err, redisfence.ErrCorruptWatermark) {
			t.Errorf("Set over watermark %q=%v, want ErrCorruptWatermark", bad, err)
		}
		if _, err := g.Watermark(ctx(t), key); !errors.Is(err, redisfence.ErrCorruptWatermark) {
			t.Errorf("Watermark() of %q=%v, want ErrCorruptWatermark", bad, err)
		}
		wantValue(t, rdb, key, "")
	}
}
