package server

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	"github.com/fenced-dev/fenced/internal/namegroup"
)

// prefixMetrics are the per-prefix metrics: wait and hold times, grants,
// expiries and revocations, labelled by the group of the name
// (Config.Metrics) and the kind of grant, so their series stay bounded.
type prefixMetrics struct {
	groups      *namegroup.Grouper
	wait        *prometheus.HistogramVec
	hold        *prometheus.HistogramVec
	grants      *prometheus.CounterVec
	expiries    *prometheus.CounterVec
	revocations *prometheus.CounterVec

	mu sync.Mutex // guards last
	// last is the group and series of the name last granted or released
	// (under mu): a batch claim's grants and releases share one queue
	// name, so its items skip the grouping and the series lookups.
	last prefixSeries
}

// prefixSeries is one kind and name's group and series, each series made
// on first use (nil before) so that none shows before its first event.
type prefixSeries struct {
	kind   fence.Kind
	name   string
	group  string
	grants prometheus.Counter
	hold   prometheus.Observer
}

func newPrefixMetrics(cfg MetricsConfig, reg prometheus.Registerer) *prefixMetrics {
	groups, err := namegroup.New(cfg.grouping())
	if err != nil {
		panic(err) // Config.Validate refused it
	}
	labels := []string{"kind", "group"}
	buckets := prometheus.ExponentialBuckets(0.001, 4, 12) // 1ms .. ~70min
	p := &prefixMetrics{
		groups: groups,
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "fenced_prefix_wait_seconds", Help: "Time from an acquire's arrival on this node to its grant (queue wait and commit), by kind and name group.", Buckets: buckets,
		}, labels),
		hold: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "fenced_prefix_hold_seconds", Help: "Time from a grant's issue (its time in the state, on the leader's clock) to its end (release, close, expiry, revocation) as this node applied it, by kind and name group.", Buckets: buckets,
		}, labels),
		grants: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenced_prefix_grants_total", Help: "Grants by kind and name group (on this node's state machine).",
		}, labels),
		expiries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenced_prefix_expiries_total", Help: "Grants ended by the expiry of their session or TTL, by kind and name group.",
		}, labels),
		revocations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenced_prefix_revocations_total", Help: "Grants ended by an administrator's revocation, by kind and name group.",
		}, labels),
	}
	reg.MustRegister(p.wait, p.hold, p.grants, p.expiries, p.revocations)
	return p
}

// waited records an acquire granted after d.
func (p *prefixMetrics) waited(g fence.Grant, d time.Duration) {
	p.wait.WithLabelValues(string(g.Kind), p.groups.Group(g.Name)).Observe(d.Seconds())
}

func (p *prefixMetrics) granted(g fence.Grant) {
	p.mu.Lock()
	ls := p.seriesLocked(g.Kind, g.Name)
	if ls.grants == nil {
		ls.grants = p.grants.WithLabelValues(string(g.Kind), ls.group)
	}
	grants := ls.grants
	p.mu.Unlock()
	grants.Inc()
}

// seriesLocked returns the group and series of kind and name, looked up
// again only when they are not the last ones'; p.mu is held.
func (p *prefixMetrics) seriesLocked(k fence.Kind, name string) *prefixSeries {
	if p.last.kind != k || p.last.name != name || p.last.group == "" {
		p.last = prefixSeries{kind: k, name: name, group: p.groups.Group(name)}
	}
	return &p.last
}

// released records the end of a grant of kind k on name, issued at
// issuedAt (Unix ms), at now. Its hold time is measured from the grant's
// own time, which the state keeps, so nothing is kept here per live grant
// (a map of a million grants' times was 35 MB at a million holders).
func (p *prefixMetrics) released(k fence.Kind, name string, issuedAt int64, reason fsm.EndReason, now time.Time) {
	p.mu.Lock()
	ls := p.seriesLocked(k, name)
	group := ls.group
	if ls.hold == nil {
		ls.hold = p.hold.WithLabelValues(string(k), group)
	}
	hold := ls.hold
	p.mu.Unlock()
	switch reason {
	case fsm.Expired:
		p.expiries.WithLabelValues(string(k), group).Inc()
	case fsm.Revoked:
		p.revocations.WithLabelValues(string(k), group).Inc()
	}
	hold.Observe(max(now.Sub(time.UnixMilli(issuedAt)), 0).Seconds())
}
