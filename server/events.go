package server

import (
	"context"
	"log/slog"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
)

// events is the state machine's observer: it wakes waiting calls, tracks
// session deadlines, counts metrics, feeds the dashboard and logs grants,
// releases and expiries (at debug level, or info with Config.LogGrants). It
// runs inside Apply and never blocks.
type events struct {
	waits   *waits
	expiry  *sessionExpiry
	delays  *lockDelays
	revokes *revokePush
	metrics *metrics
	log     *slog.Logger
	history *eventLog // test knob; nil unless TestKnobs.EventLog is set
	index   uint64    // Raft index of the entry being applied
	// now is when this node began applying the command (beforeApply): one
	// clock read per command, not two per grant and release of a batch.
	now       time.Time
	elections *electionWatch
	claims    *sessionExpiry // claim deadlines by token (queue.go)
	queue     *queueMetrics
	prefix    *prefixMetrics
	ui        *uiFeed
	// grantLevel is the level grants, releases and expiries are logged at.
	grantLevel slog.Level
}

var (
	_ fsm.Observer         = (*events)(nil)
	_ fsm.ElectionObserver = (*events)(nil)
)

func (e *events) Granted(g fence.Grant) {
	e.metrics.grants.Inc()
	switch g.Kind {
	case fence.KindPermit:
		e.metrics.permits.Inc()
	case fence.KindLeader:
		e.metrics.electionTerms.Inc()
	}
	if g.Kind == fence.KindRead || g.Kind == fence.KindWrite {
		e.metrics.rwGrants.WithLabelValues(string(g.Kind)).Inc()
	}
	e.waits.notify(waitKey{g.Kind, g.Name, g.Session}, waitOutcome{granted: true, grant: g})
	e.prefix.granted(g)
	e.ui.record(timelineEvent{Event: "grant", Kind: string(g.Kind), Name: g.Name, Session: g.Session, Token: uint64(g.Token)}, e.now)
	if e.grantsLogged() {
		e.grantLog("grant", slog.String("kind", string(g.Kind)), slog.String("name", g.Name), slog.String("scope", g.Scope), slog.Uint64("session", g.Session), slog.Uint64("token", uint64(g.Token)), slog.Uint64("index", e.index))
	}
	if e.history != nil {
		e.history.write(committedEvent{Kind: "server_grant", Name: g.Name, GrantKind: string(g.Kind), Scope: g.Scope, Session: g.Session, Token: uint64(g.Token), Seq: e.index})
	}
}

func (e *events) Released(k fence.Kind, name string, session uint64, token fence.Token, issuedAt int64, reason fsm.EndReason) {
	e.metrics.released(reason).Inc()
	if k == fence.KindClaim {
		e.claims.end(uint64(token))
		if reason == fsm.Expired {
			e.queue.expiries.Inc()
		}
	}
	e.prefix.released(k, name, issuedAt, reason, e.now)
	e.ui.record(timelineEvent{Event: "release", Kind: string(k), Name: name, Session: session, Token: uint64(token), Reason: reason.String()}, e.now)
	if e.grantsLogged() {
		e.grantLog("release", slog.String("kind", string(k)), slog.String("name", name), slog.Uint64("session", session), slog.Uint64("token", uint64(token)), slog.String("reason", reason.String()), slog.Uint64("index", e.index))
	}
	if e.history != nil {
		e.history.write(committedEvent{Kind: "server_release", Name: name, GrantKind: string(k), Session: session, Token: uint64(token), Seq: e.index, Result: reason.String()})
	}
}

func (e *events) WaitEnded(k fence.Kind, name string, session uint64) {
	e.ui.changed()
	e.waits.notify(waitKey{k, name, session}, waitOutcome{})
}

// ElectionChanged wakes the Observe streams of the election.
func (e *events) ElectionChanged(c fsm.ElectionChange) {
	e.metrics.electionChanges.Inc()
	e.elections.notify(c.Name)
	e.ui.changed()
	e.debug("election change", slog.String("name", c.Name), slog.Uint64("revision", c.Revision), slog.Uint64("leader", c.Leader.Session), slog.Uint64("token", uint64(c.Leader.Token)))
}

func (e *events) SessionStarted(session uint64, ttlMs int64) {
	e.expiry.start(session, time.Duration(ttlMs)*time.Millisecond)
}

func (e *events) SessionEnded(session uint64, reason fsm.EndReason) {
	e.revokes.ended(session, e.expiry.end(session), reason == fsm.Revoked)
	if reason == fsm.Expired {
		e.metrics.expiries.Inc()
		e.ui.record(timelineEvent{Event: "expiry", Session: session}, e.now)
		e.grantLog("expiry", slog.Uint64("session", session), slog.Uint64("index", e.index))
		e.history.write(committedEvent{Kind: "server_expire", Session: session, Seq: e.index})
	}
}

// grantsLogged reports whether grantLog logs anything: the callers build
// its attributes only then (a batch claim has a grant and a release per
// item).
func (e *events) grantsLogged() bool {
	return e.log.Enabled(context.Background(), e.grantLevel)
}

// grantLog logs a grant, release or expiry at grantLevel.
func (e *events) grantLog(msg string, attrs ...slog.Attr) {
	if e.log.Enabled(context.Background(), e.grantLevel) {
		e.log.LogAttrs(context.Background(), e.grantLevel, msg, attrs...)
	}
}

func (e *events) debug(msg string, attrs ...slog.Attr) {
	if e.log.Enabled(context.Background(), slog.LevelDebug) {
		e.log.LogAttrs(context.Background(), slog.LevelDebug, msg, attrs...)
	}
}
