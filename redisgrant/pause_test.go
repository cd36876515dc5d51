package redisgrant_test

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/internal/proctest"
	"github.com/fenced-dev/fenced/redisfence"
	"github.com/fenced-dev/fenced/redisgrant"
)

// A holder paused past its TTL (SIGSTOP, a real process) wakes up
// believing it holds the lock; the guard at the resource refuses its
// write because the next holder's higher token was seen there.
func TestLease_PausedHolderFencedByGuard(t *testing.T) {
	rdb := newClient(t)
	name := uniqueName(t)
	p := proctest.StartSelf(t, "REDISGRANT_HOLDER="+redisAddr, "REDISGRANT_NAME="+name, "REDISGRANT_TTL=1s")
	line := p.Line
	first := line()
	old, err := fence.ParseToken(strings.TrimPrefix(first, "token "))
	if err != nil {
		t.Fatalf("holder said %q", first)
	}
	p.Send("old-1")
	if s := line(); s != "ok" {
		t.Fatalf("holder's write in time: %q", s)
	}

	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The next holder gets the lock when Redis expires the paused one's
	// lease, and writes with its token.
	g := redisgrant.New(rdb)
	start := time.Now()
	next := mustAcquire(t, g, name, time.Minute)
	if next.Token() <= old {
		t.Fatalf("next token %d not above %d", next.Token(), old)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("next holder waited %v for a lease of 1s", d)
	}
	guard := redisfence.New(rdb)
	if err := guard.Set(ctx(t), "data:"+name, next.Token(), "new", 0); err != nil {
		t.Fatal(err)
	}

	if err := p.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	p.Send("old-2")
	if s := line(); !strings.HasPrefix(s, "error") || !strings.Contains(s, "stale token") {
		t.Fatalf("paused holder's late write: %q, want a stale token error", s)
	}
	if v, _ := rdb.Get(ctx(t), "data:"+name).Result(); v != "new" {
		t.Fatalf("data=%q, want the next holder's %q", v, "new")
	}
	err = guard.Set(ctx(t), "data:"+name, old, "x", 0)
	if !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("old token at the guard: %v", err)
	}
	var _ *redisgrant.Lease = next
}
