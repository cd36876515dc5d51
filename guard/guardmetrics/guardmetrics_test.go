package guardmetrics_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/filefence"
	"github.com/fenced-dev/fenced/guard"
	"github.com/fenced-dev/fenced/guard/guardmetrics"
)

func newCollector(t *testing.T, o guardmetrics.Options) (*guardmetrics.Collector, *prometheus.Registry) {
	t.Helper()
	c, err := guardmetrics.New(o)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	return c, reg
}

// count returns the value of the series of metric whose labels match.
func count(t *testing.T, reg *prometheus.Registry, metric string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != metric {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue series
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// A stale holder is counted as stale-rejected, never as accepted, and the
// wrapper hands back the guard's own error; an apply error is an error,
// not an acceptance.
func TestWrap_MemoryCountsDecisions(t *testing.T) {
	c, reg := newCollector(t, guardmetrics.Options{PrefixDepth: 1})
	g := c.Wrap("mem", &guard.Memory{})
	ctx := guard.ContextWithIssuer(context.Background(), "iss1")
	if err := g.Do(ctx, "orders/1", 5, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	err := g.Do(ctx, "orders/1", 4, func(context.Context) error { t.Fatal("stale write applied"); return nil })
	var stale *fence.StaleTokenError
	if !errors.As(err, &stale) || stale.Required != 5 {
		t.Fatalf("stale write: %v, want a StaleTokenError requiring 5", err)
	}
	boom := errors.New("disk full")
	if err := g.Do(ctx, "orders/2", 1, func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("apply error: %v", err)
	}
	lbl := map[string]string{"guard": "mem", "prefix": "orders/", "issuer": "iss1"}
	for metric, want := range map[string]float64{"fenced_guard_accepted_total": 1, "fenced_guard_stale_rejected_total": 1, "fenced_guard_errors_total": 1} {
		if got := count(t, reg, metric, lbl); got != want {
			t.Errorf("%s = %v, want %v", metric, got, want)
		}
	}
}

// A real file-system guard pinned to an issuer: another cluster's token is
// refused as issuer_mismatch, an invalid token as invalid.
func TestWrap_FilefenceRefusals(t *testing.T) {
	dir, err := filefence.Open(t.TempDir(), filefence.WithIssuer("ours"))
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	c, reg := newCollector(t, guardmetrics.Options{PrefixDepth: 1})
	g := c.Wrap("files", dir)
	ours := guard.ContextWithIssuer(context.Background(), "ours")
	theirs := guard.ContextWithIssuer(context.Background(), "theirs")
	if err := g.Do(ours, "a.txt", 3, nil); err != nil {
		t.Fatal(err)
	}
	if err := g.Do(theirs, "a.txt", 9, nil); !errors.Is(err, fence.ErrIssuerMismatch) {
		t.Fatalf("other issuer: %v", err)
	}
	if err := g.Do(ours, "a.txt", 0, nil); !errors.Is(err, fence.ErrInvalidToken) {
		t.Fatalf("token 0: %v", err)
	}
	if got := count(t, reg, "fenced_guard_accepted_total", map[string]string{"guard": "files", "issuer": "ours"}); got != 1 {
		t.Errorf("accepted = %v, want 1", got)
	}
	if got := count(t, reg, "fenced_guard_refused_total", map[string]string{"reason": "issuer_mismatch", "issuer": "theirs"}); got != 1 {
		t.Errorf("issuer_mismatch = %v, want 1", got)
	}
	if got := count(t, reg, "fenced_guard_refused_total", map[string]string{"reason": "invalid", "issuer": "ours"}); got != 1 {
		t.Errorf("invalid = %v, want 1", got)
	}
}

// Clients choose objects and issuers: a flood of both yields a bounded
// number of series.
func TestWrap_BoundedSeries(t *testing.T) {
	c, reg := newCollector(t, guardmetrics.Options{PrefixDepth: 1, MaxGroups: 4, MaxIssuers: 3})
	g := c.Wrap("mem", &guard.Memory{})
	for i := range 500 {
		ctx := guard.ContextWithIssuer(context.Background(), fmt.Sprintf("iss%d", i))
		if err := g.Do(ctx, fmt.Sprintf("tenant%d/x", i), 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	n := testutil.CollectAndCount(c, "fenced_guard_accepted_total")
	// At most (4 prefixes + overflow) × (3 issuers + overflow) series.
	if n > 5*4 {
		t.Fatalf("%d series after 500 distinct objects and issuers", n)
	}
	if got := count(t, reg, "fenced_guard_accepted_total", map[string]string{"prefix": "_overflow", "issuer": "_overflow"}); got < 400 {
		t.Fatalf("overflow series counted %v of the 500 writes, want most", got)
	}
}

func TestNew_RefusesBadOptions(t *testing.T) {
	for _, o := range []guardmetrics.Options{{PrefixDepth: -1}, {MaxIssuers: -1}, {Groups: []string{""}}} {
		if _, err := guardmetrics.New(o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}
