package redisfence_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard/guardtest"
	"github.com/fenced-dev/fenced/redisfence"
)

// commaAppend appends "," and ARGV[1] to the key in a fenced script.
var commaAppend = redisfence.NewScript(`return redis.call('APPEND', KEYS[1], ',' .. ARGV[1])`)

// mixedTarget appends "," and the value to the key, with Do (a queued
// APPEND in the WATCH/MULTI transaction) for even tokens and with a fenced
// script for odd ones: the suite's concurrent writers then race the two
// kinds of step against each other, and the commit order the value records
// shows whether one slipped between the other's check and write.
type mixedTarget struct {
	g   *redisfence.Guard
	rdb redis.Cmdable
}

var _ guardtest.Appender = mixedTarget{}

func (m mixedTarget) Write(ctx context.Context, object string, t fence.Token, value string) error {
	if t%2 == 1 {
		return commaAppend.Run(ctx, m.g, object, t, nil, value).Err()
	}
	return m.g.Do(ctx, object, t, func(ctx context.Context) error {
		pipe, ok := redisfence.PipelinerFromContext(ctx)
		if !ok {
			return errors.New("apply's context has no pipeliner")
		}
		pipe.Append(ctx, object, ","+value)
		return nil
	})
}

func (m mixedTarget) Read(ctx context.Context, object string) (string, fence.Token, error) {
	v, err := m.rdb.Get(ctx, object).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", 0, err
	}
	mark, err := m.g.Watermark(ctx, object)
	return strings.TrimPrefix(v, ","), mark, err
}

func (mixedTarget) Appends() bool { return true }

func TestGuard_DoConformance(t *testing.T) {
	rdb := newClient(t)
	g := redisfence.New(rdb)
	guardtest.Run(t, func(t *testing.T) guardtest.Target { return mixedTarget{g, rdb} })
	t.Run("Guard", func(t *testing.T) { guardtest.RunGuard(t, guardtest.Guard{Guard: g, Watermark: g.Watermark}) })
	t.Run("Signed", func(t *testing.T) { guardtest.RunSigned(t, guardtest.Guard{Guard: g, Watermark: g.Watermark}) })
}

func TestGuard_DoConformanceCluster(t *testing.T) {
	rdb := newClusterClient(t)
	g := redisfence.New(rdb)
	guardtest.Run(t, func(t *testing.T) guardtest.Target { return mixedTarget{g, rdb} })
	t.Run("Guard", func(t *testing.T) { guardtest.RunGuard(t, guardtest.Guard{Guard: g, Watermark: g.Watermark}) })
}

func TestGuard_Do(t *testing.T) {
	rdb := newClient(t)
	g := redisfence.New(rdb)
	tag := uniqueKey(t, "")
	key, extra := "{"+tag+"}:doc", "{"+tag+"}:log"

	// The queued commands run after the check; their replies are in their
	// Cmd values once Do returns.
	var incr *redis.IntCmd
	err := g.Do(ctx(t), key, 5, func(ctx context.Context) error {
		pipe, _ := redisfence.PipelinerFromContext(ctx)
		pipe.Set(ctx, key, "v5", 0)
		incr = pipe.Incr(ctx, extra)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := incr.Result(); err != nil || n != 1 {
		t.Fatalf("INCR reply=%d, %v; want 1", n, err)
	}
	wantValue(t, rdb, key, "v5")
	wantMark(t, g, key, 5)

	// A stale token: apply is not called, nothing is written.
	called := false
	wantStale(t, g.Do(ctx(t), key, 4, func(context.Context) error { called = true; return nil }), 4, 5)
	if called {
		t.Fatal("Do called apply for a stale token")
	}

	// apply's error comes back unchanged and nothing it queued is sent.
	boom := errors.New("boom")
	err = g.Do(ctx(t), key, 8, func(ctx context.Context) error {
		pipe, _ := redisfence.PipelinerFromContext(ctx)
		pipe.Set(ctx, key, "v8", 0)
		return boom
	})
	if err != boom {
		t.Fatalf("Do=%v, want apply's error unchanged", err)
	}
	wantValue(t, rdb, key, "v5")
	wantMark(t, g, key, 5)

	// apply cannot run the queue itself.
	err = g.Do(ctx(t), key, 8, func(ctx context.Context) error {
		pipe, _ := redisfence.PipelinerFromContext(ctx)
		pipe.Set(ctx, key, "v8", 0)
		_, err := pipe.Exec(ctx)
		return err
	})
	if !errors.Is(err, redisfence.ErrQueueExec) {
		t.Fatalf("Exec in apply: %v, want ErrQueueExec", err)
	}
	wantValue(t, rdb, key, "v5")

	// A command that fails as EXEC runs it: the others and the raise of
	// the watermark take effect (Redis does not roll back), and Do reports
	// the failure.
	err = g.Do(ctx(t), key, 9, func(ctx context.Context) error {
		pipe, _ := redisfence.PipelinerFromContext(ctx)
		pipe.LPush(ctx, key, "x") // WRONGTYPE: key holds a string
		pipe.Incr(ctx, extra)
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("Do with a failing command=%v, want the WRONGTYPE error", err)
	}
	if n, _ := rdb.Get(ctx(t), extra).Int(); n != 2 {
		t.Fatalf("%s=%d, want 2: the other command ran", extra, n)
	}
	wantMark(t, g, key, 9)

	// A command Redis refuses to queue aborts the whole transaction.
	err = g.Do(ctx(t), key, 10, func(ctx context.Context) error {
		pipe, _ := redisfence.PipelinerFromContext(ctx)
		pipe.Incr(ctx, extra)
		pipe.Do(ctx, "NO-SUCH-COMMAND")
		return nil
	})
	if err == nil {
		t.Fatal("Do with an unknown command succeeded")
	}
	if n, _ := rdb.Get(ctx(t), extra).Int(); n != 2 {
		t.Fatalf("%s=%d, want 2: an aborted transaction ran a command", extra, n)
	}
	wantMark(t, g, key, 9)

	// A nil apply is Check.
	if err := g.Do(ctx(t), key, 11, nil); err != nil {
		t.Fatal(err)
	}
	wantMark(t, g, key, 11)
	wantValue(t, rdb, key, "v5")
}

// scripterOnly is a redis.Scripter that cannot WATCH.
type scripterOnly struct{ redis.Scripter }

func TestGuard_DoNeedsWatch(t *testing.T) {
	rdb := newClient(t)
	g := redisfence.New(scripterOnly{rdb})
	key := uniqueKey(t, "")
	called := false
	err := g.Do(ctx(t), key, 3, func(context.Context) error { called = true; return nil })
	if !errors.Is(err, fence.ErrInvalidArgument) || called {
		t.Fatalf("Do through a Scripter without WATCH=%v (apply called %v), want fence.ErrInvalidArgument", err, called)
	}
	// Without an apply it is one script, which any Scripter runs.
	if err := g.Do(ctx(t), key, 3, nil); err != nil {
		t.Fatal(err)
	}
	wantMark(t, g, key, 3)
}

func TestPipelinerFromContext(t *testing.T) {
	if pipe, ok := redisfence.PipelinerFromContext(context.Background()); ok || pipe != nil {
		t.Fatalf("PipelinerFromContext(no step)=%v, %v; want nil, false", pipe, ok)
	}
}
