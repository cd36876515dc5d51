//go:build fencedfaults

package server

import (
	"bytes"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
)

// Every fault that is on logs a WARN line at start; none is logged when
// all are off.
func TestFaults_WarnWhenOn(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	newFaultState(DefaultConfig()).warn(log)
	if buf.Len() != 0 {
		t.Fatalf("faults off, but logged:\n%s", buf.String())
	}
	cfg := DefaultConfig()
	cfg.Test.ClockRate, cfg.Test.UnfencedKV, cfg.Test.ResetTokens = 2, true, true
	cfg.Test.OverCapacity, cfg.Test.ReaderWithWriter, cfg.Test.SecondLeader = true, true, true
	cfg.Raft.Test.Dial = func(string, time.Duration) (net.Conn, error) { return nil, nil }
	newFaultState(cfg).warn(log)
	for _, fault := range []string{"clock-rate", "unfenced-kv", "reset-tokens", "over-capacity", "reader-with-writer", "second-leader", "dial-hook"} {
		if !strings.Contains(buf.String(), "level=WARN msg=\"TEST FAULT ON") || !strings.Contains(buf.String(), "fault="+fault) {
			t.Errorf("no WARN line for fault %s in:\n%s", fault, buf.String())
		}
	}
}

// The reset-tokens fault reports the grants of a leader as if its counter
// had restarted at its takeover, and only when it is on.
func TestFaults_ResetTokensReportsShiftedTokens(t *testing.T) {
	off := newFaultState(DefaultConfig())
	off.tookOver(40)
	if g := off.reported(fence.Grant{Token: 41}); g.Token != 41 {
		t.Fatalf("fault off: reported token %d, want 41", g.Token)
	}
	cfg := DefaultConfig()
	cfg.Test.ResetTokens = true
	on := newFaultState(cfg)
	on.tookOver(40)
	for _, tt := range []struct{ issued, reported fence.Token }{{41, 1}, {45, 5}, {40, 40}, {7, 7}} {
		if g := on.reported(fence.Grant{Token: tt.issued}); g.Token != tt.reported {
			t.Errorf("token %d reported as %d, want %d", tt.issued, g.Token, tt.reported)
		}
	}
}
