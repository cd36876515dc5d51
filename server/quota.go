package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// Per-source quotas and the session creation rate.
//
// A client's identity is its source address (the IP of its connection)
// until authentication exists; identify is the one place that decides it,
// so an authenticated identity replaces it there. The identity is charged
// for every session it creates: the fsm records it on the session (the
// session's owner, replicated and kept in snapshots) and counts per owner
// the live sessions, the grants those sessions hold and their places in
// queues. The leader puts its limits into each command that could grow
// them (statev1.Quota), and the state machine refuses the command at a
// limit, so the count is exact, the same on every replica and after a
// failover. The rate of new sessions is the leader's own, in memory: a
// new leader starts with full buckets.

// headerSource carries, on a call a member forwarded to the leader, the
// identity of the client it came from. The leader believes it only from a
// cluster member's address (see identify).
const headerSource = "X-Fenced-Source"

type identityKey struct{}

// sourceIdentity is what withIdentity attaches to a request's context: the
// caller's identity and the quota every command of its calls carries,
// made once per request or native connection rather than once per call.
// The quota is shared by those calls' commands and never modified.
type sourceIdentity struct {
	id    string
	quota *statev1.Quota
}

// withIdentity returns ctx carrying identity id and its quota.
func (s *Server) withIdentity(ctx context.Context, id string) context.Context {
	l := s.cfg.Limits
	q := &statev1.Quota{Owner: id, MaxSessions: l.MaxSessionsPerSource, MaxHeld: l.MaxGrantsPerSource, MaxWaiting: l.MaxWaitersPerSource}
	return context.WithValue(ctx, identityKey{}, &sourceIdentity{id: id, quota: q})
}

// identityOf returns the identity identify attached to ctx; "" when none
// (a call made inside the server), which no quota limits.
func identityOf(ctx context.Context) string {
	if id, ok := ctx.Value(identityKey{}).(*sourceIdentity); ok {
		return id.id
	}
	return ""
}

// identify attaches the caller's identity to the request: its source
// address, or, on a call forwarded by a member (X-Fenced-Forwarded-By
// from the address of a member's API), the source that member saw.
// Until authentication exists, a client on a member's host could claim
// another source this way.
func (s *Server) identify(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := sourceOf(r.RemoteAddr)
		if fwd := r.Header.Get(headerSource); fwd != "" && r.Header.Get(headerForwardedBy) != "" && s.isMemberHost(id) {
			id = fwd
		}
		r.Header.Del(headerSource)
		next.ServeHTTP(w, r.WithContext(s.withIdentity(r.Context(), id)))
	})
}

// isMemberHost reports whether host is the host of a member's API address.
func (s *Server) isMemberHost(host string) bool {
	var addrs []string
	s.sm.read(func(m *fsm.Machine) { addrs = m.NodeAPIAddrs() })
	for _, a := range addrs {
		if sourceOf(a) == host {
			return true
		}
	}
	return false
}

// quota returns the quota of the caller of ctx, for a command that may
// create a session, take a grant or queue.
func (s *Server) quota(ctx context.Context) *statev1.Quota {
	if id, ok := ctx.Value(identityKey{}).(*sourceIdentity); ok {
		return id.quota
	}
	l := s.cfg.Limits
	return &statev1.Quota{MaxSessions: l.MaxSessionsPerSource, MaxHeld: l.MaxGrantsPerSource, MaxWaiting: l.MaxWaitersPerSource}
}

// quotaFlags name the flag that sets each quota.
var quotaFlags = map[string]string{
	fsm.QuotaSessions: "max-sessions-per-source",
	fsm.QuotaHeld:     "max-grants-per-source",
	fsm.QuotaWaiting:  "max-waiters-per-source",
}

// limitErr counts a refusal by a limit of the state machine and names the
// flag that sets it; other errors pass unchanged.
func (s *Server) limitErr(err error) error {
	var qe *fsm.QuotaError
	var ke *fsm.KVLimitError
	switch {
	case errors.As(err, &qe):
		s.limitMetrics.rejections.WithLabelValues(qe.Resource).Inc()
		return fmt.Errorf("%w (set by fenced serve --%s); end sessions or release locks first", err, quotaFlags[qe.Resource])
	case errors.As(err, &ke):
		s.limitMetrics.rejections.WithLabelValues("kv_" + ke.Resource).Inc()
		return fmt.Errorf("%w (set by fenced serve --max-kv-%s)", err, ke.Resource)
	}
	return err
}

// allowSession takes one session creation from the caller's bucket, or
// refuses it with fence.ErrLimitExceeded.
func (s *Server) allowSession(ctx context.Context) error {
	id := identityOf(ctx)
	if id == "" || s.sessionRate.allow(id) {
		return nil
	}
	s.limitMetrics.rejections.WithLabelValues("session_rate").Inc()
	l := s.cfg.Limits
	return fmt.Errorf("%w: %s creates sessions faster than %g per second (bursts of %d; set by fenced serve --session-rate, --session-burst); retry later",
		fence.ErrLimitExceeded, id, l.SessionRate, l.SessionBurst)
}

// rateLimiter is a token bucket per key: rate tokens a second, up to
// burst. A rate of 0 allows everything.
type rateLimiter struct {
	rate  float64
	burst float64
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

// maxIdleBuckets is the bucket count above which full buckets (no use
// since they refilled) are dropped, keeping the map bounded by the
// sources active within about burst/rate seconds.
const maxIdleBuckets = 4096

func newRateLimiter(rate float64, burst int, now func() time.Time) *rateLimiter {
	return &rateLimiter{rate: rate, burst: float64(burst), now: now, buckets: make(map[string]*bucket)}
}

// allow takes a token from key's bucket; false when it is empty.
func (r *rateLimiter) allow(key string) bool {
	if r.rate <= 0 {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	b := r.buckets[key]
	if b == nil {
		if len(r.buckets) >= maxIdleBuckets {
			r.dropFull(now)
		}
		b = &bucket{tokens: r.burst, last: now}
		r.buckets[key] = b
	}
	b.tokens = min(r.burst, b.tokens+now.Sub(b.last).Seconds()*r.rate)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// dropFull forgets the buckets that have refilled: a new one starts full.
func (r *rateLimiter) dropFull(now time.Time) {
	for k, b := range r.buckets {
		if b.tokens+now.Sub(b.last).Seconds()*r.rate >= r.burst {
			delete(r.buckets, k)
		}
	}
}
