package server

import (
	"context"
	"fmt"

	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	fence "github.com/fenced-dev/fenced"

	"github.com/fenced-dev/fenced/fsm"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// Headers of the forwarding layer.
const (
	// HeaderLocal asks a member to answer from its own state instead of
	// the leader's: a stale read, possibly behind the leader.
	HeaderLocal = "X-Fenced-Local"
	// headerForwardedBy marks a request a follower forwarded; the receiver
	// never forwards it again.
	headerForwardedBy = "X-Fenced-Forwarded-By"
	// HeaderLeader is set by a follower on the response of a call it
	// forwarded and the leader answered: the leader's API address as the
	// membership registered it. The Go SDK moves its calls to the
	// configured endpoint with that address (and never dials an address
	// it was not configured with).
	HeaderLeader = "Fenced-Leader"
)

// readPaths are the API calls that only read. On the leader they are
// answered after it confirmed its leadership with a quorum (linearizable);
// with HeaderLocal any member answers from its own state.
var readPaths = map[string]bool{
	fencedv1connect.LockServiceVerifyProcedure:        true,
	fencedv1connect.LockServiceDescribeProcedure:      true,
	fencedv1connect.LockServiceListProcedure:          true,
	fencedv1connect.LockServiceStatusProcedure:        true,
	fencedv1connect.KVServiceGetProcedure:             true,
	fencedv1connect.ClusterServiceStatusProcedure:     true,
	fencedv1connect.KeyServiceListKeysProcedure:       true,
	fencedv1connect.SnapshotServiceLineageProcedure:   true,
	fencedv1connect.SemaphoreServiceVerifyProcedure:   true,
	fencedv1connect.SemaphoreServiceDescribeProcedure: true,
	// An Observe stream is read-indexed when it opens.
	fencedv1connect.ElectionServiceLeaderProcedure:  true,
	fencedv1connect.ElectionServiceObserveProcedure: true,
	fencedv1connect.RWLockServiceVerifyProcedure:    true,
	fencedv1connect.RWLockServiceDescribeProcedure:  true,
	fencedv1connect.QueueServiceStatsProcedure:      true,
	fencedv1connect.LatchServiceJoinProcedure:       true,
	fencedv1connect.LatchServiceWaitProcedure:       true,
	fencedv1connect.LimiterServiceDescribeProcedure: true,
}

func isRead(r *http.Request) bool {
	if strings.HasPrefix(r.URL.Path, "/v1/kv/") {
		return r.Method == http.MethodGet || r.Method == http.MethodHead
	}
	return readPaths[r.URL.Path]
}

// isAPI reports whether the path is an API call, authenticated (everything
// but the node's own endpoints and the dashboard's static assets).
func isAPI(path string) bool {
	return path != "/metrics" && path != "/healthz" && path != "/readyz" && path != WellKnownKeysPath && !isUIAsset(path)
}

// forwarding routes API calls: the leader serves them (reads after
// confirming its leadership); a follower forwards them to the leader's API
// address, once, as a reverse proxy that streams both ways (keep-alive
// streams included).
func (s *Server) forwarding(local http.Handler) http.Handler {
	transport := s.memberTransport()
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			target, _ := pr.In.Context().Value(leaderURLKey{}).(*url.URL)
			pr.SetURL(target)
			pr.Out.Header.Set(headerForwardedBy, s.cfg.Raft.NodeID)
			if id := identityOf(pr.In.Context()); id != "" {
				pr.Out.Header.Set(headerSource, id)
			}
			// The leader cannot see the client's certificate: this node
			// vouches for the identity it verified, with its own node
			// certificate (authenticating).
			pr.Out.Header.Del(headerClientIdentity)
			if c := callerOf(pr.In.Context()); c != nil && c.certIdentity != "" {
				pr.Out.Header.Set(headerClientIdentity, c.certIdentity)
			}
		},
		Transport:     transport,
		FlushInterval: -1,
		// Its errors (a stream cut while copying) go to the JSON log, not
		// to the standard logger's plain lines on stderr.
		ErrorLog: slog.NewLogLogger(s.log.With("component", "forward").Handler(), slog.LevelWarn),
		ModifyResponse: func(res *http.Response) error {
			if b, ok := res.Request.Context().Value(upstreamBodyKey{}).(*upstreamBody); ok {
				b.set(res.Body)
			}
			// Only an answer of the leader names it: a forward that
			// failed, or that the target refused as no longer the leader
			// (503), does not send clients to a leader that may be gone.
			if target, ok := res.Request.Context().Value(leaderURLKey{}).(*url.URL); ok && res.StatusCode != http.StatusServiceUnavailable {
				res.Header.Set(HeaderLeader, target.Host)
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			unavailable(w, "forward to the leader: "+err.Error())
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isAPI(r.URL.Path) || isUIAPI(r.URL.Path) || r.Header.Get(HeaderLocal) != "" {
			local.ServeHTTP(w, r)
			return
		}
		if s.node.IsLeader() {
			if isRead(r) {
				ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
				err := s.readIndex(ctx)
				cancel()
				if err != nil {
					unavailable(w, "linearizable read: "+err.Error())
					return
				}
			}
			local.ServeHTTP(w, r)
			return
		}
		if by := r.Header.Get(headerForwardedBy); by != "" {
			unavailable(w, "node "+s.cfg.Raft.NodeID+" is not the leader (request forwarded by "+by+"); retry")
			return
		}
		target := s.leaderURL()
		if target == nil {
			unavailable(w, "node "+s.cfg.Raft.NodeID+" knows no leader yet (election in progress or no quorum); retry")
			return
		}
		s.metrics.forwarded.Inc()
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		body := &upstreamBody{}
		// A stream, or a call that may wait, is cut when this node sees
		// the leader change: it would otherwise outlive the leader it was
		// forwarded to (cutOnLeaderChange).
		if cutOnLeaderChange(r.URL.Path) {
			go s.cancelOnLeaderChange(ctx, func() {
				cancel()
				// Cancelling the context does not always end a read of a
				// streamed response in progress; closing the body does.
				body.close()
			})
		}
		ctx = context.WithValue(context.WithValue(ctx, leaderURLKey{}, target), upstreamBodyKey{}, body)
		proxy.ServeHTTP(w, r.WithContext(ctx))
	})
}

// upstreamBodyKey carries a forwarded call's *upstreamBody in its context.
type upstreamBodyKey struct{}

// upstreamBody is the leader's response body of a forwarded call, closed
// to abort the call.
type upstreamBody struct {
	mu     sync.Mutex
	body   io.Closer
	closed bool
}

func (b *upstreamBody) set(body io.Closer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.body = body
	if b.closed {
		_ = body.Close()
	}
}

func (b *upstreamBody) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	if b.body != nil {
		_ = b.body.Close()
	}
}

// cancelOnLeaderChange cancels a forwarded stream once this node no
// longer sees the leader it forwarded the stream to (the leader died, was
// cut off or stepped down), so that a long-lived stream through this node
// breaks and its client retries elsewhere instead of waiting on a silent
// stream.
// It follows raft's leader observations, so it reacts as soon as this node
// learns of the change.
func (s *Server) cancelOnLeaderChange(ctx context.Context, cancel func()) {
	// The view may still lag the leader the call was forwarded to (raft's
	// own, read by leaderURL); it catches up through Changed.
	l := s.node.KnownLeader()
	leader, _ := s.node.Leader()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.node.Done():
			cancel()
			return
		case <-l.Changed:
			if l = s.node.KnownLeader(); l.ID != leader {
				cancel()
				return
			}
		}
	}
}

type leaderURLKey struct{}

// leaderURL returns the leader's API base URL, or nil when no leader or
// its API address is known.
func (s *Server) leaderURL() *url.URL {
	id, _ := s.node.Leader()
	if id == "" || id == s.cfg.Raft.NodeID {
		return nil
	}
	var addr string
	s.sm.read(func(m *fsm.Machine) { addr = m.NodeAPIAddr(id) })
	if addr == "" {
		return nil
	}
	return s.memberURL(addr)
}

// unavailable answers 503 in the Connect error format, which Connect,
// gRPC and HTTP clients all read as "unavailable, retry".
func unavailable(w http.ResponseWriter, msg string) {
	writeConnectError(w, http.StatusServiceUnavailable, "unavailable", msg)
}

// writeConnectError answers an error of code (Connect's name of it) in the
// Connect error format with an HTTP status that gRPC and HTTP clients read
// as the same code.
func writeConnectError(w http.ResponseWriter, status int, code, msg string) {
	body, _ := json.Marshal(map[string]string{"code": code, "message": msg})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

// readIndex makes a read on the leader linearizable (Raft's read-index): the
// leader must have finished taking over (every entry of earlier terms
// applied), confirm with a quorum that it still leads, and then wait until
// its state machine has applied everything committed at that point. A read
// served before that could miss a write already acknowledged, for
// instance by the previous leader.
//
// The takeover is the current term's: serving is set by the goroutine
// that follows the leadership, which lags raft, so a node that lost its
// leadership and won a later term can still show the earlier term there
// before this term's Barrier. After ReadIndex confirmed the leadership
// (with a quorum or on the lease), raft's leader term must be the serving
// one; terms only grow, so the read follows that term's takeover.
func (s *Server) readIndex(ctx context.Context) error {
	serving := s.serving.Load()
	if serving == 0 {
		return fmt.Errorf("%w: node %s is still taking over as leader; retry", fence.ErrNotLeader, s.cfg.Raft.NodeID)
	}
	if err := s.node.ReadIndex(ctx); err != nil {
		return err
	}
	term, ok := s.node.LeaderTerm()
	if !ok {
		return fmt.Errorf("%w: node %s lost its leadership during the read; retry", fence.ErrNotLeader, s.cfg.Raft.NodeID)
	}
	if term != serving {
		return fmt.Errorf("%w: node %s is still taking over as leader of term %d (it served term %d); retry", fence.ErrNotLeader, s.cfg.Raft.NodeID, term, serving)
	}
	return nil
}
