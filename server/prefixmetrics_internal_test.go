package server

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
)

// A grant's hold time runs from its own time (issuedAt, kept by the
// state) to its end; a grant this node never saw granted (restored from a
// snapshot) is measured too, and an issue time after the end (another
// node's clock) counts as 0.
func TestPrefixMetrics_HoldFromIssuedAt(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := newPrefixMetrics(MetricsConfig{}, reg)
	now := time.UnixMilli(1_000_000_000)
	p.released(fence.KindLock, "orders/1", now.Add(-1500*time.Millisecond).UnixMilli(), fsm.Unlocked, now)
	p.released(fence.KindLock, "orders/2", now.Add(time.Second).UnixMilli(), fsm.Unlocked, now)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "fenced_prefix_hold_seconds" {
			continue
		}
		if len(f.GetMetric()) != 1 {
			t.Fatalf("%d hold series, want 1 (kind lock, group orders/)", len(f.GetMetric()))
		}
		h := f.GetMetric()[0].GetHistogram()
		if h.GetSampleCount() != 2 || h.GetSampleSum() != 1.5 {
			t.Errorf("hold times: %d samples summing to %v s, want 2 summing to 1.5 s", h.GetSampleCount(), h.GetSampleSum())
		}
		return
	}
	t.Fatal("no fenced_prefix_hold_seconds")
}
