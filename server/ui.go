package server

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// The dashboard (docs/dashboard.md): static assets under /ui/, open to
// anyone who reaches the API port (they hold no data), and two calls that
// need the read permission like Status and show only what the caller may
// read: /ui/api/snapshot (one JSON view of this node) and /ui/api/events (a
// Server-Sent Events stream of such views, one after each change). Every
// member serves its own state machine's view, like a Status with
// X-Fenced-Local: a follower's may lag the leader's by its replication lag.

//go:embed web
var webFiles embed.FS

const (
	uiPath    = "/ui/"
	uiAPIPath = "/ui/api/"
	// uiMinInterval is the shortest time between two views a stream sends:
	// changes within it are coalesced into one.
	uiMinInterval = 100 * time.Millisecond
	// uiClusterInterval is how often a stream looks at the cluster
	// (members, leader, indexes) when nothing else changed: membership
	// and reachability are not state machine events.
	uiClusterInterval = time.Second
	// uiMaxValue is how much of an election's value a view shows.
	uiMaxValue = 256
)

// isUIAsset reports whether path is a static asset of the dashboard.
func isUIAsset(path string) bool {
	return path == "/ui" || strings.HasPrefix(path, uiPath) && !strings.HasPrefix(path, uiAPIPath)
}

// isUIAPI reports whether path is a dashboard call, answered by the node
// that receives it, never forwarded.
func isUIAPI(path string) bool { return strings.HasPrefix(path, uiAPIPath) }

func (s *Server) uiRoutes(mux *http.ServeMux) {
	sub, err := fs.Sub(webFiles, "web")
	if err != nil {
		panic(err)
	}
	files := http.StripPrefix("/ui/", http.FileServerFS(sub))
	mux.Handle("/ui/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	}))
	mux.Handle("/ui", http.RedirectHandler("/ui/", http.StatusMovedPermanently))
	mux.HandleFunc("GET /ui/api/snapshot", s.uiSnapshot)
	mux.HandleFunc("GET /ui/api/events", s.uiEvents)
}

// uiView is what the dashboard shows of one node.
type uiView struct {
	Node       string          `json:"node"`
	NowMs      int64           `json:"now_ms"`
	Prefix     string          `json:"prefix"`
	Cluster    uiCluster       `json:"cluster"`
	Locks      []uiLock        `json:"locks"`
	Semaphores []uiSemaphore   `json:"semaphores"`
	RWLocks    []uiRWLock      `json:"rwlocks"`
	Elections  []uiElection    `json:"elections"`
	Sessions   []uiSession     `json:"sessions"`
	Hidden     int             `json:"hidden"`
	Truncated  bool            `json:"truncated"`
	Timeline   []timelineEvent `json:"timeline"`
}

type uiCluster struct {
	Leader       string     `json:"leader"`
	Term         uint64     `json:"term"`
	CommitIndex  uint64     `json:"commit_index"`
	AppliedIndex uint64     `json:"applied_index"`
	LastToken    uint64     `json:"last_token"`
	Issuer       string     `json:"issuer"`
	Members      []uiMember `json:"members"`
	Error        string     `json:"error,omitempty"`
}

type uiMember struct {
	ID           string `json:"id"`
	APIAddr      string `json:"api_addr"`
	PeerAddr     string `json:"peer_addr"`
	Voter        bool   `json:"voter"`
	Role         string `json:"role"`
	Up           bool   `json:"up"`
	AppliedIndex uint64 `json:"applied_index"`
	Lag          uint64 `json:"lag"`
}

type uiGrant struct {
	Session uint64 `json:"session"`
	Token   uint64 `json:"token"`
	HeldMs  int64  `json:"held_ms"`
	TTLMs   int64  `json:"ttl_ms,omitempty"`
}

type uiLock struct {
	Name          string   `json:"name"`
	Holder        *uiGrant `json:"holder"`
	Waiters       []uint64 `json:"waiters"`
	LockDelayMs   int64    `json:"lock_delay_ms"`
	DelayPending  bool     `json:"delay_pending"`
	DelayAfter    uint64   `json:"delay_after,omitempty"`
	DelayLengthMs int64    `json:"delay_length_ms,omitempty"`
}

type uiSemaphore struct {
	Name     string      `json:"name"`
	Capacity uint32      `json:"capacity"`
	Permits  []uiPermit  `json:"permits"`
	Waiters  []uiSemWait `json:"waiters"`
}

type uiPermit struct {
	Slot uint32 `json:"slot"`
	uiGrant
}

type uiSemWait struct {
	Session uint64 `json:"session"`
	Permits uint32 `json:"permits"`
}

type uiRWLock struct {
	Name    string     `json:"name"`
	Writer  *uiGrant   `json:"writer"`
	Readers []uiGrant  `json:"readers"`
	Waiters []uiRWWait `json:"waiters"`
}

type uiRWWait struct {
	Session uint64 `json:"session"`
	Mode    string `json:"mode"`
}

type uiElection struct {
	Name       string   `json:"name"`
	Leader     *uiGrant `json:"leader"`
	Value      string   `json:"value"`
	Candidates []uint64 `json:"candidates"`
	Revision   uint64   `json:"revision"`
}

type uiSession struct {
	ID    uint64 `json:"id"`
	TTLMs int64  `json:"ttl_ms"`
	// Held and Waiting are what it holds and waits for, every primitive's
	// (fsm.SessionInfo.Shown).
	Held    []string `json:"held"`
	Waiting []string `json:"waiting"`
	// SinceRenewalMs is how long ago the leader last renewed the session;
	// null on a follower, which does not see renewals.
	SinceRenewalMs *int64 `json:"since_renewal_ms"`
}

// uiAuthorize checks that the caller may read, as Status without a name
// needs; the view then holds only what it may read.
func (s *Server) uiAuthorize(w http.ResponseWriter, r *http.Request) (func(string) bool, string, bool) {
	if err := s.authorize(r.Context(), "GET "+r.URL.Path, need{perm: permRead, anywhere: true}); err != nil {
		writeJSONError(w, http.StatusForbidden, err, nil)
		return nil, "", false
	}
	prefix := r.URL.Query().Get("prefix")
	if len(prefix) > fence.MaxNameLen {
		writeJSONError(w, http.StatusBadRequest, fmt.Errorf("%w: prefix is %d bytes, longer than %d", fence.ErrInvalidArgument, len(prefix), fence.MaxNameLen), nil)
		return nil, "", false
	}
	return s.readable(r.Context()), prefix, true
}

// uiSnapshot serves GET /ui/api/snapshot?prefix=P: this node's view of the
// cluster and of every object whose name starts with P.
func (s *Server) uiSnapshot(w http.ResponseWriter, r *http.Request) {
	visible, prefix, ok := s.uiAuthorize(w, r)
	if !ok {
		return
	}
	v := s.view(r.Context(), prefix, visible, s.cluster(r.Context()))
	v.Timeline, _ = s.ui.since(0, prefix, visible)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}

// uiEvents serves GET /ui/api/events?prefix=P as Server-Sent Events: a
// "view" event with the whole view at once, then one after each change of
// the state machine (coalesced, at most one per uiMinInterval) and at
// least one per uiClusterInterval; each carries the timeline entries that
// are new since the previous one.
func (s *Server) uiEvents(w http.ResponseWriter, r *http.Request) {
	visible, prefix, ok := s.uiAuthorize(w, r)
	if !ok {
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	woken, stop := s.ui.subscribe()
	defer stop()
	ctx := r.Context()
	var seq uint64
	var cluster uiCluster
	var clusterAt time.Time
	tick := time.NewTicker(uiClusterInterval)
	defer tick.Stop()
	for {
		if time.Since(clusterAt) >= uiClusterInterval/2 {
			cluster, clusterAt = s.cluster(ctx), time.Now()
		}
		v := s.view(ctx, prefix, visible, cluster)
		v.Timeline, seq = s.ui.since(seq, prefix, visible)
		data, err := json.Marshal(v)
		if err != nil {
			return
		}
		if _, err := fmt.Fprintf(w, "event: view\ndata: %s\n\n", data); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-woken:
		case <-tick.C:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(uiMinInterval):
		}
	}
}

// cluster returns the cluster as ClusterService.Status on this node shows
// it, members probed with the caller's credentials.
func (s *Server) cluster(ctx context.Context) uiCluster {
	ctx, cancel := context.WithTimeout(ctx, 2*memberProbeTimeout)
	defer cancel()
	resp, err := (&clusterService{s}).Status(ctx, connect.NewRequest(&fencedv1.ClusterStatusRequest{}))
	if err != nil {
		st := s.node.Stats()
		return uiCluster{Leader: st.LeaderID, Term: st.Term, CommitIndex: st.CommitIndex, AppliedIndex: s.sm.appliedIndex(), Error: err.Error()}
	}
	m := resp.Msg
	c := uiCluster{Leader: m.Leader, Term: m.Term, CommitIndex: m.CommitIndex, AppliedIndex: m.AppliedIndex, LastToken: m.LastToken}
	for _, mb := range m.Members {
		c.Members = append(c.Members, uiMember{ID: mb.Id, APIAddr: mb.ApiAddr, PeerAddr: mb.PeerAddr, Voter: mb.Voter, Role: mb.Role, Up: mb.Role != "unreachable", AppliedIndex: mb.AppliedIndex, Lag: mb.Lag})
	}
	return c
}

// view reads this node's state machine: at most Config.UIMaxItems objects
// of each primitive and sessions, names starting with prefix, only what
// visible accepts (nil: all).
func (s *Server) view(ctx context.Context, prefix string, visible func(string) bool, cluster uiCluster) uiView {
	limit := s.cfg.UIMaxItems
	now := time.Now()
	v := uiView{Node: s.cfg.Raft.NodeID, NowMs: now.UnixMilli(), Prefix: prefix, Cluster: cluster}
	leader := s.serving.Load() != 0
	grant := func(g fence.Grant) *uiGrant {
		if g.Token == 0 {
			return nil
		}
		return &uiGrant{Session: g.Session, Token: uint64(g.Token), HeldMs: max(0, now.Sub(g.IssuedAt).Milliseconds()), TTLMs: g.TTL.Milliseconds()}
	}
	var sessions []fsm.SessionInfo
	s.sm.read(func(m *fsm.Machine) {
		v.Cluster.Issuer = m.Issuer()
		v.Cluster.LastToken = max(v.Cluster.LastToken, uint64(m.LastToken()))
		locks, hidden, more := m.LocksVisible(prefix, "", visible, limit)
		v.Hidden += hidden
		v.Truncated = v.Truncated || more
		for _, l := range locks {
			ul := uiLock{Name: l.Name, Holder: grant(l.Holder), Waiters: l.Waiters, LockDelayMs: l.Delay.Holder.Milliseconds(), DelayPending: l.Delay.Pending}
			if l.Delay.Pending {
				ul.DelayAfter, ul.DelayLengthMs = uint64(l.Delay.After), l.Delay.Length.Milliseconds()
			}
			v.Locks = append(v.Locks, ul)
		}
		sems, hidden, more := m.SemaphoresVisible(prefix, visible, limit)
		v.Hidden += hidden
		v.Truncated = v.Truncated || more
		for _, sem := range sems {
			us := uiSemaphore{Name: sem.Name, Capacity: sem.Capacity}
			for _, p := range sem.Permits {
				us.Permits = append(us.Permits, uiPermit{Slot: p.Slot, uiGrant: *grant(p.Grant)})
			}
			for _, w := range sem.Waiters {
				us.Waiters = append(us.Waiters, uiSemWait{Session: w.Session, Permits: w.Permits})
			}
			v.Semaphores = append(v.Semaphores, us)
		}
		rws, hidden, more := m.RWLocksVisible(prefix, visible, limit)
		v.Hidden += hidden
		v.Truncated = v.Truncated || more
		for _, rw := range rws {
			ur := uiRWLock{Name: rw.Name, Writer: grant(rw.Writer)}
			for _, g := range rw.Readers {
				ur.Readers = append(ur.Readers, *grant(g))
			}
			for _, w := range rw.Waiters {
				mode := "read"
				if w.Write {
					mode = "write"
				}
				ur.Waiters = append(ur.Waiters, uiRWWait{Session: w.Session, Mode: mode})
			}
			v.RWLocks = append(v.RWLocks, ur)
		}
		els, hidden, more := m.ElectionsVisible(prefix, visible, limit)
		v.Hidden += hidden
		v.Truncated = v.Truncated || more
		for _, e := range els {
			v.Elections = append(v.Elections, uiElection{Name: e.Name, Leader: grant(e.Leader), Value: shownValue(e.Value), Candidates: e.Candidates, Revision: e.Revision})
		}
		var hs int
		sessions, hs, more = m.SessionsVisible(0, visible, limit)
		v.Hidden += hs
		v.Truncated = v.Truncated || more
	})
	for _, si := range sessions {
		held, waiting := si.Shown()
		us := uiSession{ID: si.ID, TTLMs: si.TTLMs, Held: held, Waiting: waiting}
		if leader {
			if d, ok := s.expiry.sinceRenewal(si.ID); ok {
				ms := max(0, d.Milliseconds())
				us.SinceRenewalMs = &ms
			}
		}
		v.Sessions = append(v.Sessions, us)
	}
	return v
}

// shownValue is an election's value as text, cut to uiMaxValue bytes.
func shownValue(b []byte) string {
	if len(b) > uiMaxValue {
		b = b[:uiMaxValue]
	}
	if !utf8.Valid(b) {
		return fmt.Sprintf("(%d bytes, not UTF-8)", len(b))
	}
	return string(b)
}
