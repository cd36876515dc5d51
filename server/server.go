package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	"github.com/fenced-dev/fenced/internal/tlsfiles"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
	"github.com/fenced-dev/fenced/raftstore"
)

// shutdownGrace bounds how long Shutdown waits for in-flight calls before
// it closes the remaining connections (keep-alive streams among them).
const shutdownGrace = 2 * time.Second

// Server is a running fenced server: one Raft node and its API.
type Server struct {
	cfg    Config
	log    *slog.Logger
	clock  fence.Clock
	faults *faultState // test faults; none in a production build
	sm     *stateMachine
	// calls runs the calls of Pipeline streams on kept goroutines.
	calls *workers
	// signers signs grants with the current key, expanded once.
	signers grantSigners
	// grantBatch signs the grants handed out together (Config.SignBatchMax).
	grantBatch *grantBatcher
	node       *raftstore.Node
	expiry     *sessionExpiry
	delays     *lockDelays // lock delays to end (lockdelay.go)
	revokes    *revokePush
	waits      *waits
	// elections wakes the Observe streams of elections.
	elections *electionWatch
	metrics   *metrics
	// ui feeds the dashboard's event streams (ui.go).
	ui   *uiFeed
	ln   net.Listener
	http *http.Server
	// natives are the open native-protocol connections (native.go).
	natives nativeConns

	// claims are the work queue's claim deadlines (queue.go).
	claims       *sessionExpiry
	queueMetrics *queueMetrics

	// reservation is this node's recorded token reservation.
	reservation *tokenReservation
	// failure is why the server stopped on its own (see Err).
	failure atomic.Pointer[error]

	limitMetrics *limitMetrics
	sessionRate  *rateLimiter // session creations per source
	// auth holds the bearer tokens of Config.AuthFile; nil without one
	// (every call is allowed).
	auth *authenticator
	// audit is the audit log; nil without Config.Audit.File.
	audit *auditLog
	// apiTLS is the API's TLS identity; nil without TLS.
	apiTLS *tlsfiles.Reloader
	// members calls other members' APIs: registration with the leader,
	// status probes.
	members *http.Client

	// serving is the term this node leads in once its takeover finished
	// (barrier applied, leadership recorded, session deadlines restarted); 0 while it
	// is not a serving leader. Keep-alives and expiries need it.
	serving atomic.Uint64

	ctx      context.Context // cancelled by Shutdown: ends waits and loops
	cancel   context.CancelFunc
	loops    sync.WaitGroup
	shutOnce sync.Once
	shutErr  error
	done     chan struct{}
}

// Start opens the node's data dir, starts Raft and serves the API on
// cfg.Listen. It returns once the API listens; the node may still be
// electing itself (see /readyz).
func Start(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	cfg.Raft.Logger = log
	s := &Server{cfg: cfg, log: log, faults: newFaultState(cfg), waits: newWaits(), elections: newElectionWatch(), revokes: newRevokePush(), calls: newWorkers(), done: make(chan struct{}), grantBatch: newGrantBatcher(cmp.Or(cfg.SignBatchMax, DefaultSignBatchMax))}
	s.faults.warn(log)
	s.faults.batcher(s.grantBatch)
	cfg.warnInsecure(log)
	s.clock = s.faults.clock()
	s.expiry = newSessionExpiry(s.clock)
	s.delays = newLockDelays(s.clock)
	s.claims = newClaimDeadlines(s.clock)
	var obs events
	s.sm = newStateMachine(&obs)
	res, err := openTokenReservation(cfg.Raft.DataDir)
	if err != nil {
		return nil, err
	}
	s.reservation = res
	s.sm.recordReservations(res)
	s.faults.machine(s.sm.m)
	s.metrics = newMetrics(s.sm)
	s.metrics.registry.MustRegister(s.grantBatch.collectors()...)
	s.sm.observeApply = s.metrics.applyDuration.Observe
	if cfg.SignGrants && s.grantBatch.max > 1 && !s.faults.rewritesGrants() {
		s.sm.prepareResults = s.presignGrants
	}
	s.queueMetrics = newQueueMetrics(s.metrics.registry, s.sm)
	s.ui = newUIFeed()
	prefix := newPrefixMetrics(cfg.Metrics, s.metrics.registry)
	s.metrics.prefix = prefix
	s.sm.afterRestore = func(m *fsm.Machine) {
		s.ui.changed()
		s.expiry.reset(m.SessionTTLs())
		s.delays.reset(m.PendingDelays())
		s.elections.notifyAll()
		s.resetClaims(m)
	}
	obs = events{waits: s.waits, elections: s.elections, expiry: s.expiry, delays: s.delays, claims: s.claims, queue: s.queueMetrics, revokes: s.revokes, metrics: s.metrics, log: log, prefix: prefix, ui: s.ui, grantLevel: slog.LevelDebug}
	if cfg.LogGrants {
		obs.grantLevel = slog.LevelInfo
	}
	if cfg.Test.EventLog != nil {
		obs.history = &eventLog{enc: json.NewEncoder(cfg.Test.EventLog)}
	}
	s.sm.beforeApply = func(index uint64) {
		obs.index, obs.now = index, time.Now()
		s.ui.changed() // a queued waiter, say, which the observer does not see
	}
	cfg.Raft.OnDiskError = func(op string, err error) { s.metrics.diskErrors.WithLabelValues(op).Inc() }
	cfg.Raft.OnApply = func(d time.Duration, err error) {
		if err == nil {
			s.metrics.proposeDuration.Observe(d.Seconds())
		}
	}

	if cfg.AuthFile != "" {
		if s.auth, err = loadAuthenticator(cfg.AuthFile); err != nil {
			return nil, err
		}
	}
	if s.audit, err = openAuditLog(cfg.Audit, cfg.Raft.NodeID, log); err != nil {
		return nil, err
	}
	ln, err := s.listen()
	if err != nil {
		s.audit.close()
		return nil, err
	}
	if ln, err = s.secure(ln); err != nil {
		s.audit.close()
		return nil, err
	}
	node, err := raftstore.Open(cfg.Raft, s.sm)
	if err != nil {
		ln.Close()
		s.audit.close()
		return nil, err
	}
	s.node, s.ln = node, ln
	s.metrics.watchDisk(node)
	s.metrics.watchReads(node)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if !cfg.Limits.DisableNative {
		// After the node and the context: native connections use both.
		s.ln = s.nativeListen(ln)
		ln = s.ln
	}

	s.http = &http.Server{
		Handler:     s.routes(),
		Protocols:   new(http.Protocols),
		BaseContext: func(net.Listener) context.Context { return s.ctx },
	}
	cfg.Limits.configureHTTP(s.http)
	s.http.Protocols.SetHTTP1(true)
	s.setProtocols()

	go s.watchNode()
	s.loops.Add(3)
	go func() {
		defer s.loops.Done()
		s.calls.sweep(s.ctx, workerIdle)
	}()
	go func() {
		defer s.loops.Done()
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("api server stopped", "err", err)
		}
	}()
	go func() {
		defer s.loops.Done()
		s.followLeadership()
	}()
	log.Info("fenced serving", "api", ln.Addr().String(), "peer", node.Addr(), "node", cfg.Raft.NodeID, "data_dir", cfg.Raft.DataDir)
	return s, nil
}

// compressMinBytes is the smallest response the API compresses.
const compressMinBytes = 4096

func (s *Server) routes() http.Handler {
	// Responses are compressed only when large enough to gain from it:
	// most are a few dozen bytes, and setting up gzip for each cost a
	// fifth of the server's CPU in profiles.
	compress := connect.WithCompressMinBytes(compressMinBytes)
	authz := connect.WithInterceptors(authInterceptor{s})
	opts := []connect.HandlerOption{connect.WithReadMaxBytes(s.cfg.MaxMessageBytes), compress, authz}
	mux := http.NewServeMux()
	mux.Handle(fencedv1connect.NewSessionServiceHandler(&sessionService{s}, opts...))
	mux.Handle(fencedv1connect.NewLockServiceHandler(&lockService{s}, opts...))
	mux.Handle(fencedv1connect.NewSemaphoreServiceHandler(&semaphoreService{s}, opts...))
	// An election value may be up to the state machine's 64 KiB cap.
	electionOpts := []connect.HandlerOption{connect.WithReadMaxBytes(max(s.cfg.MaxMessageBytes, s.cfg.Limits.electionValueLimit()+s.cfg.MaxMessageBytes)), compress, authz}
	mux.Handle(fencedv1connect.NewElectionServiceHandler(&electionService{s}, electionOpts...))
	mux.Handle(fencedv1connect.NewRWLockServiceHandler(&rwLockService{s}, opts...))
	// kv values are up to 1 MiB, plus the message's own fields. The lock
	// service's Pipeline carries kv puts too, so its messages get the kv
	// limit; the path is more specific than the service's prefix above.
	kvOpts := []connect.HandlerOption{connect.WithReadMaxBytes(max(s.cfg.MaxMessageBytes, fsm.MaxValueBytes+s.cfg.MaxMessageBytes)), compress, authz}
	_, pipeline := fencedv1connect.NewLockServiceHandler(&lockService{s}, kvOpts...)
	mux.Handle(fencedv1connect.LockServicePipelineProcedure, pipeline)
	mux.Handle(fencedv1connect.NewKVServiceHandler(&kvService{s}, kvOpts...))
	// Queue payloads are up to --queue-max-payload, plus the message's own fields.
	queueOpts := []connect.HandlerOption{connect.WithReadMaxBytes(s.cfg.Queue.withDefaults().MaxPayloadBytes + s.cfg.MaxMessageBytes), compress, authz}
	mux.Handle(fencedv1connect.NewQueueServiceHandler(&queueService{s}, queueOpts...))
	mux.HandleFunc("/v1/kv/{key...}", s.kvHTTP)
	mux.Handle(fencedv1connect.NewClusterServiceHandler(&clusterService{s}, opts...))
	mux.Handle(fencedv1connect.NewKeyServiceHandler(&keyService{s}, opts...))
	mux.Handle(fencedv1connect.NewSnapshotServiceHandler(&snapshotService{s}, opts...))
	mux.HandleFunc(WellKnownKeysPath, s.wellKnownKeys)
	mux.Handle(fencedv1connect.NewLatchServiceHandler(&latchService{s}, opts...))
	mux.Handle(fencedv1connect.NewLimiterServiceHandler(&limiterService{s}, opts...))
	mux.Handle("/metrics", promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", s.healthz)
	mux.HandleFunc("/readyz", s.readyz)
	s.uiRoutes(mux)
	return s.identify(s.bodyDeadline(bufferStreamBodies(s.authenticating(s.forwarding(kvCanonicalPath(mux))))))
}

// readyz answers 200 when this node can serve writes: it is the leader and
// has finished taking over, or it knows a leader, and its disk takes
// writes (see healthz). 503 otherwise.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if h := s.node.DiskHealth(); !h.OK() {
		http.Error(w, "not ready: "+diskReason(h), http.StatusServiceUnavailable)
		return
	}
	var issuer string
	s.sm.read(func(m *fsm.Machine) { issuer = m.Issuer() })
	id, _ := s.node.Leader()
	switch {
	case s.serving.Load() != 0:
		fmt.Fprintln(w, "ok: leader")
	case id != "" && issuer != "" && !s.node.IsLeader():
		fmt.Fprintf(w, "ok: follower of %s\n", id)
	default:
		http.Error(w, "not ready: no leader has taken over yet", http.StatusServiceUnavailable)
	}
}

// Addr returns the API's listen address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// apiAddr is the API address members forward to: Config.AdvertiseAddr, or
// the bound listen address.
func (s *Server) apiAddr() string {
	if s.cfg.AdvertiseAddr != "" {
		return s.cfg.AdvertiseAddr
	}
	return s.Addr()
}

// PeerAddr returns the Raft transport's address.
func (s *Server) PeerAddr() string { return s.node.Addr() }

// Done is closed when the server has shut down.
func (s *Server) Done() <-chan struct{} { return s.done }

// Shutdown stops the server gracefully: it stops accepting connections,
// ends waiting acquires (they answer Unavailable; queued waiters stay queued
// in the state machine until their sessions end), waits for in-flight
// requests up to ctx's deadline, then stops Raft, finishing in-flight
// applies and closing the log cleanly. It is safe to call more than once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutOnce.Do(func() {
		s.serving.Store(0)
		s.cancel()
		// Unary calls finish within moments and waits end with s.ctx, but a
		// keep-alive stream lasts until its client hangs up: give in-flight
		// calls a short grace, then close what is left.
		hctx, hcancel := context.WithTimeout(ctx, shutdownGrace)
		herr := s.http.Shutdown(hctx)
		hcancel()
		if herr != nil {
			herr = s.http.Close()
		}
		s.natives.closeAll()
		nerr := s.node.Shutdown()
		s.loops.Wait()
		s.shutErr = errors.Join(herr, nerr, s.audit.close())
		close(s.done)
		s.log.Info("fenced stopped", "node", s.cfg.Raft.NodeID)
	})
	return s.shutErr
}

// propose commits a command, in one Raft entry with the commands proposed
// at the same moment (group commit), and returns its result. A refused
// command's reason is returned as the error. Without a deadline on ctx the
// proposal is bounded by Config.ProposeTimeout (raftstore's ProposeWithin:
// no context or timer of its own per call).
func (s *Server) propose(ctx context.Context, cmd *statev1.Command) (fsm.Result, error) {
	cmd.NowUnixMs = time.Now().UnixMilli()
	resp, err := s.node.ProposeWithin(ctx, cmd, s.cfg.ProposeTimeout)
	if err != nil {
		return fsm.Result{}, err
	}
	res, ok := resp.(*fsm.Result)
	if !ok {
		return fsm.Result{}, fmt.Errorf("propose: unexpected result %T", resp)
	}
	if errors.Is(res.Err, fence.ErrSessionNotFound) {
		s.metrics.staleSession.Inc()
	}
	return *res, res.Err
}
