package server

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	"github.com/fenced-dev/fenced/raftstore"
)

// metrics are the server's Prometheus metrics, on a registry of its own so
// that several servers can run in one process (tests).
type metrics struct {
	registry *prometheus.Registry
	grants   prometheus.Counter
	permits  prometheus.Counter
	rwGrants *prometheus.CounterVec
	releases *prometheus.CounterVec
	// releasedBy caches releases' series by reason (released), made on
	// first use so that no series shows before its first release.
	releasedBy      [fsm.Revoked + 1]prometheus.Counter
	expiries        prometheus.Counter
	sessionRenewals prometheus.Counter
	staleSession    prometheus.Counter
	kvWrites        *prometheus.CounterVec
	forwarded       prometheus.Counter
	diskErrors      *prometheus.CounterVec
	proposeDuration prometheus.Histogram
	applyDuration   prometheus.Histogram
	lockDelays      prometheus.Counter // lockdelay.go
	renewals        prometheus.Counter // renew.go
	// Elections.
	electionTerms     prometheus.Counter
	electionChanges   prometheus.Counter
	electionObservers prometheus.Gauge
	latches           *latchMetrics
	limiters          *limiterMetrics
	// prefix are the per-prefix metrics (prefixmetrics.go).
	prefix *prefixMetrics
}

func newMetrics(sm *stateMachine) *metrics {
	buckets := prometheus.ExponentialBuckets(0.0001, 2, 18) // 100µs .. ~13s
	m := &metrics{
		registry: prometheus.NewRegistry(),
		lockDelays: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenced_lock_delays_total", Help: "Lock delays started after the expiry or revocation of a grant that asked for one.",
		}),
		renewals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenced_grant_renewals_total", Help: "Grants renewed with Renew (fenced renew, Lease.Renew).",
		}),
		grants: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenced_grants_total", Help: "Locks granted, immediately or to a waiter (on this node's state machine).",
		}),
		permits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenced_semaphore_permits_granted_total", Help: "Semaphore permits granted, immediately or to a waiter (on this node's state machine); each permit is also a grant.",
		}),
		rwGrants: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenced_rwlock_grants_total", Help: "Read/write lock grants, immediately or to a waiter, by mode: read, write (also counted in fenced_grants_total).",
		}, []string{"mode"}),
		releases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenced_releases_total", Help: "Grants ended, by reason: released, closed (session closed), expired.",
		}, []string{"reason"}),
		expiries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenced_session_expiries_total", Help: "Sessions expired after their TTL ran out without renewal.",
		}),
		sessionRenewals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenced_session_renewals_total", Help: "Sessions renewed by keep-alives (KeepAlive, KeepAliveOnce), on the leader that renewed them.",
		}),
		staleSession: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenced_stale_session_rejections_total", Help: "Requests rejected because their session no longer exists.",
		}),
		kvWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenced_kv_writes_total", Help: "Writes to the fenced kv by outcome: accepted, stale (token below the watermark), version_mismatch, error.",
		}, []string{"outcome"}),
		forwarded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenced_forwarded_requests_total", Help: "API requests this follower forwarded to the leader.",
		}),
		diskErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenced_disk_errors_total", Help: "Failed writes to the data dir, by op: log_append, log_segment (creating the next segment file), log_truncate, stable (term and vote), snapshot.",
		}, []string{"op"}),
		proposeDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "fenced_commit_duration_seconds", Help: "Time from proposing a Raft entry (one command, or the commands proposed at the same moment) to its commit and apply (Raft round trip with fsync).", Buckets: buckets,
		}),
		applyDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "fenced_apply_duration_seconds", Help: "Time to apply one command to the state machine.", Buckets: buckets,
		}),
		electionTerms: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenced_election_terms_total", Help: "Leaders elected, each with a new term token (on this node's state machine).",
		}),
		electionChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenced_election_changes_total", Help: "Changes of an election's leader or value (new leader, no leader, proclaim), each a new revision.",
		}),
		electionObservers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fenced_election_observers", Help: "Observe streams open on this node.",
		}),
	}
	gauge := func(name, help string, f func(*fsm.Machine) int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			var v int
			sm.read(func(fm *fsm.Machine) { v = f(fm) })
			return float64(v)
		})
	}
	m.registry.MustRegister(
		m.grants, m.permits, m.rwGrants, m.releases, m.expiries, m.sessionRenewals, m.staleSession, m.kvWrites, m.forwarded, m.diskErrors, m.proposeDuration, m.applyDuration,
		gauge("fenced_sessions", "Live sessions.", (*fsm.Machine).SessionCount),
		gauge("fenced_waiters", "Acquires waiting in lock queues.", (*fsm.Machine).WaiterCount),
		gauge("fenced_locks_held", "Locks currently held.", (*fsm.Machine).HeldCount),
		gauge("fenced_semaphore_permits_held", "Semaphore permits currently held, over all semaphores.", func(fm *fsm.Machine) int { n, _ := fm.SemaphoreCounts(); return n }),
		gauge("fenced_semaphore_waiters", "Acquires waiting in semaphore queues.", func(fm *fsm.Machine) int { _, n := fm.SemaphoreCounts(); return n }),
		m.lockDelays, m.renewals,
		gauge("fenced_locks_delayed", "Locks in their lock delay.", func(fm *fsm.Machine) int { return len(fm.PendingDelays()) }),
		m.electionTerms, m.electionChanges, m.electionObservers,
		gauge("fenced_elections_led", "Elections with a leader.", (*fsm.Machine).LedElectionCount),
		gauge("fenced_election_candidates", "Sessions waiting to lead an election.", (*fsm.Machine).CandidateCount),
		gauge("fenced_rwlock_readers", "Read grants of read/write locks currently held.", func(fm *fsm.Machine) int { r, _, _ := fm.RWCounts(); return r }),
		gauge("fenced_rwlock_writers", "Write grants of read/write locks currently held.", func(fm *fsm.Machine) int { _, w, _ := fm.RWCounts(); return w }),
		gauge("fenced_rwlock_waiters", "Requests waiting in read/write lock queues.", func(fm *fsm.Machine) int { _, _, q := fm.RWCounts(); return q }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fenced_last_token", Help: "The last fencing token issued."}, func() float64 {
			var v float64
			sm.read(func(fm *fsm.Machine) { v = float64(fm.LastToken()) })
			return v
		}),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	for _, k := range []fence.Kind{fence.KindRead, fence.KindWrite} {
		m.rwGrants.WithLabelValues(string(k))
	}
	m.latches = newLatchMetrics(m.registry, sm)
	m.limiters = newLimiterMetrics(m.registry, sm)
	for _, op := range []string{raftstore.DiskOpLogAppend, raftstore.DiskOpLogSegment, raftstore.DiskOpLogTruncate, raftstore.DiskOpStable, raftstore.DiskOpSnapshot} {
		m.diskErrors.WithLabelValues(op)
	}
	return m
}

// watchDisk adds the gauge of node's disk health.
func (m *metrics) watchDisk(node *raftstore.Node) {
	m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fenced_disk_ok", Help: "1 while every kind of write to the data dir succeeded last time, 0 otherwise (see /healthz).",
	}, func() float64 {
		if node.DiskHealth().OK() {
			return 1
		}
		return 0
	}))
}

// released returns the fenced_releases_total series of reason. The state
// machine's observer calls it with the state locked for writing (one
// caller at a time), once per release, so it looks the series up once per
// reason, not per item of a batch.
func (m *metrics) released(reason fsm.EndReason) prometheus.Counter {
	if reason < 0 || int(reason) >= len(m.releasedBy) {
		return m.releases.WithLabelValues(reason.String())
	}
	c := m.releasedBy[reason]
	if c == nil {
		c = m.releases.WithLabelValues(reason.String())
		m.releasedBy[reason] = c
	}
	return c
}
