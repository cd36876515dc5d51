package main_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/internal/proctest"
)

// TestLatchAndLimiter_SurviveLeaderKill runs a latch and a rate limiter on
// a 3-node cluster through its followers, then SIGKILLs the leader: the
// waiter (connected to a follower) is answered only once the count reaches
// zero, after the failover; the latch keeps its generation and count; the
// limiter keeps the permits it counted, so a take on the new leader is
// refused. (Time going backwards under a new leader is attacked in
// fsm's TestLimiterNeverOverLimit: these members share one clock.)
func TestLatchAndLimiter_SurviveLeaderKill(t *testing.T) {
	servers := proctest.StartCluster(t, 3)
	leader, followers := leaderOf(t, servers)
	f1, f2 := followers[0].Addr, followers[1].Addr
	both := f1 + "," + f2
	must := func(args ...string) string {
		t.Helper()
		out, errOut, code := runFenced(t, args...)
		if code != 0 {
			t.Fatalf("fenced %v: exit %d\n%s%s", args, code, out, errOut)
		}
		return out
	}
	must("latch", "create", "job", "--count", "2", "--endpoints", f1)
	must("limiter", "config", "api", "--algorithm", "token_bucket", "--limit", "3", "--rate", "1", "--window", "24h", "--endpoints", f1)
	must("limiter", "take", "api", "--permits", "3", "--endpoints", f2)

	type result struct {
		out  string
		code int
	}
	waited := make(chan result, 1)
	go func() {
		out, errOut, code := runFenced(t, "latch", "wait", "job", "--generation", "1", "--wait", "90s", "--timeout", "60s", "--endpoints", f2)
		waited <- result{out + errOut, code}
	}()
	must("latch", "count-down", "job", "--generation", "1", "--endpoints", f1)
	select {
	case r := <-waited:
		t.Fatalf("the waiter returned while the count is 1: exit %d %s", r.code, r.out)
	case <-time.After(500 * time.Millisecond):
	}

	leader.Kill()
	if out := must("latch", "join", "job", "--endpoints", both, "--timeout", "60s"); !strings.Contains(out, "generation 1, count 1 of 2") {
		t.Fatalf("after the failover the latch is %q, want generation 1 with count 1", out)
	}
	out, errOut, code := runFenced(t, "limiter", "take", "api", "--endpoints", both, "--timeout", "60s")
	if code != 3 || !strings.Contains(out, "not granted") {
		t.Fatalf("take on the new leader: exit %d %s%s; want refused: the old leader's permits are still counted", code, out, errOut)
	}
	select {
	case r := <-waited:
		t.Fatalf("the waiter returned before the last count-down: exit %d %s", r.code, r.out)
	default:
	}
	if out := must("latch", "count-down", "job", "--generation", "1", "--endpoints", both, "--timeout", "60s"); !strings.Contains(out, "completed") {
		t.Fatalf("last count-down: %q", out)
	}
	select {
	case r := <-waited:
		if r.code != 0 || !strings.Contains(r.out, "generation 1 completed") {
			t.Fatalf("waiter: exit %d %s; want completed", r.code, r.out)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("the waiter was not answered after the count reached zero")
	}
}
