// Package guardmetrics exports what the guards of the resource kit decide
// as Prometheus metrics, so the resource side of fencing is visible: how
// many writes each guard accepted, how many it rejected as stale, and why
// it refused others, by object prefix and by the issuer presented.
//
// One Collector type serves every guard: every guard of this module
// (guard.Memory, postgres.Guard, sqlfence.Guard, redisfence.Guard,
// filefence.Dir, outbox.Guard) implements fence.Guard, and Collector.Wrap
// returns a fence.Guard that counts the decisions of the guard it wraps.
// Register the Collector once; wrap each guard under a name of its own:
//
//	metrics, err := guardmetrics.New(guardmetrics.Options{})
//	prometheus.MustRegister(metrics)
//	orders := metrics.Wrap("orders-db", pgGuard)
//	err = orders.Do(ctx, "orders/42", token, write)
//
// The series (docs/observability.md):
//
//	fenced_guard_accepted_total{guard,prefix,issuer}
//	fenced_guard_stale_rejected_total{guard,prefix,issuer}
//	fenced_guard_refused_total{guard,reason,prefix,issuer}   reason: issuer_mismatch, invalid
//	fenced_guard_errors_total{guard,prefix,issuer}           the store or the write failed
//
// Their cardinality is bounded: objects are grouped by prefix like the
// server's per-prefix metrics (Options), and at most MaxIssuers distinct
// issuers get a label of their own.
package guardmetrics

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
	"github.com/fenced-dev/fenced/internal/namegroup"
)

// DefaultMaxIssuers is Options.MaxIssuers when 0.
const DefaultMaxIssuers = 16

// Options says how objects and issuers become labels.
type Options struct {
	// PrefixDepth groups an object by its first PrefixDepth
	// "/"-separated segments ("orders/eu/42" is "orders/" at 1); 0 puts
	// every object in the group "" (the zero Options do that). Ignored
	// with Groups. 1 groups like the server's default.
	PrefixDepth int
	// Groups, when set, are the only prefixes: an object is counted under
	// the longest it starts with, or "_other".
	Groups []string
	// MaxGroups caps the distinct prefixes (then "_overflow"); 0 means
	// 100.
	MaxGroups int
	// MaxIssuers caps the distinct issuer labels (then "_overflow"); 0
	// means DefaultMaxIssuers. An unpinned guard sees whatever issuer a
	// client presents, so the cap matters.
	MaxIssuers int
}

// Collector counts guard decisions; it is a prometheus.Collector.
type Collector struct {
	groups     *namegroup.Grouper
	maxIssuers int

	mu      sync.Mutex
	issuers map[string]bool

	accepted *prometheus.CounterVec
	stale    *prometheus.CounterVec
	refused  *prometheus.CounterVec
	errs     *prometheus.CounterVec
}

var _ prometheus.Collector = (*Collector)(nil)

// New returns a Collector, or an error saying which option is wrong.
func New(o Options) (*Collector, error) {
	if o.MaxIssuers < 0 {
		return nil, fmt.Errorf("guardmetrics: max issuers %d is negative; use 0 for the default %d", o.MaxIssuers, DefaultMaxIssuers)
	}
	groups, err := namegroup.New(namegroup.Config{Groups: o.Groups, Depth: o.PrefixDepth, MaxGroups: o.MaxGroups})
	if err != nil {
		return nil, fmt.Errorf("guardmetrics: %w", err)
	}
	if o.MaxIssuers == 0 {
		o.MaxIssuers = DefaultMaxIssuers
	}
	labels := []string{"guard", "prefix", "issuer"}
	return &Collector{
		groups: groups, maxIssuers: o.MaxIssuers, issuers: map[string]bool{},
		accepted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenced_guard_accepted_total", Help: "Writes a guard admitted: the token was at or above the object's watermark (and the write, if any, succeeded).",
		}, labels),
		stale: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenced_guard_stale_rejected_total", Help: "Writes a guard rejected because their token was below the object's watermark: a stale holder stopped at the resource.",
		}, labels),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenced_guard_refused_total", Help: "Writes a guard refused before the watermark, by reason: issuer_mismatch (a token of another cluster), invalid (token out of range, bad object).",
		}, []string{"guard", "reason", "prefix", "issuer"}),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenced_guard_errors_total", Help: "Guard calls that failed otherwise: the store or the write returned an error; the watermark was not raised (see each guard's documentation for exceptions).",
		}, labels),
	}, nil
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	c.accepted.Describe(ch)
	c.stale.Describe(ch)
	c.refused.Describe(ch)
	c.errs.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.accepted.Collect(ch)
	c.stale.Collect(ch)
	c.refused.Collect(ch)
	c.errs.Collect(ch)
}

// Wrap returns g counting its decisions under the label guard=name. The
// wrapper changes nothing of what g does or returns.
func (c *Collector) Wrap(name string, g fence.Guard) fence.Guard {
	return fence.GuardFunc(func(ctx context.Context, object string, t fence.Token, apply func(ctx context.Context) error) error {
		err := g.Do(ctx, object, t, apply)
		c.Observe(ctx, name, object, err)
		return err
	})
}

// Observe counts one decision of guard name for object: err is what its Do
// returned. Wrap calls it; a guard method that does not go through Do
// (postgres.Update, say) can call it with its own result.
func (c *Collector) Observe(ctx context.Context, name, object string, err error) {
	prefix, issuer := c.groups.Group(object), c.issuer(guard.IssuerFromContext(ctx))
	var stale *fence.StaleTokenError
	switch {
	case err == nil:
		c.accepted.WithLabelValues(name, prefix, issuer).Inc()
	case errors.As(err, &stale):
		c.stale.WithLabelValues(name, prefix, issuer).Inc()
	case errors.Is(err, fence.ErrIssuerMismatch):
		c.refused.WithLabelValues(name, "issuer_mismatch", prefix, issuer).Inc()
	case errors.Is(err, fence.ErrInvalidToken), errors.Is(err, fence.ErrInvalidArgument):
		c.refused.WithLabelValues(name, "invalid", prefix, issuer).Inc()
	default:
		c.errs.WithLabelValues(name, prefix, issuer).Inc()
	}
}

// issuer returns the label of issuer: itself while fewer than maxIssuers
// are known, namegroup.Overflow after.
func (c *Collector) issuer(issuer string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.issuers[issuer] {
		return issuer
	}
	if len(c.issuers) >= c.maxIssuers {
		return namegroup.Overflow
	}
	c.issuers[issuer] = true
	return issuer
}
