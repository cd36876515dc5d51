//go:build fencedfaults

package main

import (
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/fenced-dev/fenced/server"
)

// addFaultFlags registers the hidden fault flags of a test build.
func addFaultFlags(f *pflag.FlagSet, cfg *server.Config) {
	f.Float64Var(&cfg.Test.ClockRate, "test-clock-rate", 0, "test only: run the lease clock at this rate (a skewed server)")
	f.BoolVar(&cfg.Test.UnfencedKV, "test-unfenced-kv", false, "test only: the kv accepts stale writes (negative control)")
	f.BoolVar(&cfg.Test.UnscopedKV, "test-unscoped-kv", false, "test only: the kv skips the scope rule but keeps the stale check (negative control)")
	f.BoolVar(&cfg.Test.ResetTokens, "test-reset-tokens", false, "test only: a new leader reports tokens as if its counter were reset (negative control)")
	f.BoolVar(&cfg.Test.AnyOwner, "test-any-owner", false, "test only: any request may act for any session, whatever its secret (negative control)")
	f.BoolVar(&cfg.Test.OverCapacity, "test-over-capacity", false, "test only: semaphores grant one permit over their capacity (negative control)")
	f.BoolVar(&cfg.Test.ReaderWithWriter, "test-reader-with-writer", false, "test only: read/write locks admit a reader beside a writer (negative control)")
	f.BoolVar(&cfg.Test.SecondLeader, "test-second-leader", false, "test only: elections make a new candidate leader while another leads (negative control)")
	f.BoolVar(&cfg.Test.AckAnyToken, "test-ack-any-token", false, "test only: queues accept an ack of a claimed item with any token (negative control)")
	f.BoolVar(&cfg.Test.LatchEarly, "test-latch-early", false, "test only: latches release waiters one count early (negative control)")
	f.BoolVar(&cfg.Test.MisdeliverSignedGrants, "test-misdeliver-signed-grants", false, "test only: the leader hands each grant the signed grant of the one signed before it (negative control)")
	f.BoolVar(&cfg.Raft.Test.UncheckedLease, "test-unchecked-lease-reads", false, "test only: with --lease-reads, serve every read on the lease whenever the node believes it leads, without checking it (negative control)")
	for _, name := range []string{"test-unchecked-lease-reads", "test-clock-rate", "test-unfenced-kv", "test-unscoped-kv", "test-reset-tokens", "test-any-owner", "test-over-capacity", "test-reader-with-writer", "test-second-leader",
		"test-ack-any-token", "test-latch-early", "test-misdeliver-signed-grants"} {
		f.MarkHidden(name)
	}
}

// applyFaultEnv sets the dial hook from dialViaEnv, when it is set.
func applyFaultEnv(cfg *server.Config) error {
	via := os.Getenv(dialViaEnv)
	if via == "" {
		return nil
	}
	m, err := parseDialVia(via)
	if err != nil {
		return usageError("%s: %v", dialViaEnv, err)
	}
	cfg.Raft.Test.Dial = func(addr string, timeout time.Duration) (net.Conn, error) {
		if v, ok := m[addr]; ok {
			addr = v
		}
		return net.DialTimeout("tcp", addr, timeout)
	}
	return nil
}

func parseDialVia(s string) (map[string]string, error) {
	m := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		peer, via, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || peer == "" || via == "" {
			return nil, fmt.Errorf("%q: want PEER-ADDR=DIAL-ADDR", part)
		}
		m[peer] = via
	}
	return m, nil
}
