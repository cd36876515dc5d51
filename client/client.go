package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/internal/wire"
	"github.com/fenced-dev/fenced/internal/wire/wireconnect"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// DefaultRequestTimeout is how long one attempt of a call may take, on top
// of the time an acquire waits in the queue, before the SDK gives up on that
// attempt and retries it (with the same request id) on the next endpoint.
const DefaultRequestTimeout = 5 * time.Second

// Client is a connection to a fenced cluster. It sends every call to one
// endpoint and fails over to the next when that endpoint is unreachable or
// is not the leader, moves to the leader when a follower that forwarded a
// call names it (see WithFollowLeader), and keeps all of its sessions alive
// over a single KeepAlive stream.
//
// A Client is safe for concurrent use. Create one per process and Close it
// when done.
type Client struct {
	endpoints []*endpoint
	cur       atomic.Int64 // index of the endpoint calls go to first

	httpClient *http.Client
	// ownTransport is the transport New built; nil when the caller brought
	// an HTTP client, in which case the SDK never closes its connections.
	ownTransport *http.Transport
	// tls is WithTLS's config, never modified: every transport the Client
	// builds gets a copy of its own.
	tls *tls.Config
	// token is WithBearerToken's token; "" sends none.
	token string
	// hooks are WithHooks's functions.
	hooks Hooks
	// followLeaderOn is WithFollowLeader's setting.
	followLeaderOn bool
	// protocol is WithProtocol's setting.
	protocol       Protocol
	log            *slog.Logger
	clock          clock
	requestTimeout time.Duration

	keeper *keeper

	// ctx is cancelled, with ErrClosed as its cause, when Close is called.
	ctx    context.Context
	cancel context.CancelCauseFunc
	// wg counts the goroutines the Client started; goRun adds to it until
	// stopping is set.
	wg        sync.WaitGroup
	mu        sync.Mutex
	stopping  bool
	closeOnce sync.Once
}

// endpoint is one server address with its generated API clients.
type endpoint struct {
	addr      string
	url       string
	host      string // the host:port of url, matched against the leader a follower names
	sessions  fencedv1connect.SessionServiceClient
	locks     fencedv1connect.LockServiceClient
	rwlocks   fencedv1connect.RWLockServiceClient
	kv        fencedv1connect.KVServiceClient
	cluster   fencedv1connect.ClusterServiceClient
	keys      fencedv1connect.KeyServiceClient
	pipe      *pipeline      // Acquire, Release, KV Put, queue calls, limiter takes, semaphore and read/write lock acquires and releases go through it
	nat       nativeEndpoint // the native connection of pipe and the keeper
	snapshots fencedv1connect.SnapshotServiceClient
	// semaphores serves Verify and Describe, and acquires and releases
	// when the Pipeline does not take them.
	semaphores fencedv1connect.SemaphoreServiceClient
	// elections serves Election and the observers.
	elections fencedv1connect.ElectionServiceClient
	queues    fencedv1connect.QueueServiceClient
}

// An Option configures a Client.
type Option func(*options)

type options struct {
	httpClient     *http.Client
	log            *slog.Logger
	clock          fence.Clock
	requestTimeout time.Duration
	tls            *tls.Config // see WithTLS
	token          string      // see WithBearerToken
	hooks          Hooks       // see WithHooks
	noFollowLeader bool        // see WithFollowLeader
	protocol       Protocol    // see WithProtocol
}

// WithHTTPClient makes the Client send its calls through hc instead of the
// HTTP/2 cleartext (h2c) transport it builds by default, for example to
// talk TLS. The KeepAlive call is a bidirectional stream, so hc must speak
// HTTP/2 to the endpoints. The Client does not close hc's connections.
func WithHTTPClient(hc *http.Client) Option {
	return func(o *options) { o.httpClient = hc }
}

// WithLogger makes the Client log failovers, retries, jeopardy and lost
// sessions to l. By default it logs nothing.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.log = l }
}

// WithClock replaces the monotonic clock the Client measures validity with.
// It is meant for tests. When c also implements TimerClock, its AfterFunc
// runs the Client's timers; otherwise they run on the system clock and read
// c.Now when they fire.
func WithClock(c fence.Clock) Option {
	return func(o *options) { o.clock = c }
}

// maxRequestTimeout is the longest WithRequestTimeout.
const maxRequestTimeout = 24 * time.Hour

// WithRequestTimeout sets how long one attempt of a call may take before it
// is retried, on top of any time it waits in a lock's queue: more than 0,
// at most 24h. The default is DefaultRequestTimeout.
func WithRequestTimeout(d time.Duration) Option {
	return func(o *options) { o.requestTimeout = d }
}

// New returns a Client for the cluster whose members listen on endpoints,
// each "host:port" (served over HTTP/2 cleartext) or a base URL such as
// "https://host:port". It tries them in order. New does not connect:
// connections are made by the first call that needs one.
//
// New fails, wrapping fence.ErrInvalidArgument, when endpoints is empty or
// holds an entry that is not an address.
func New(endpoints []string, opts ...Option) (*Client, error) {
	o := options{requestTimeout: DefaultRequestTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if len(endpoints) == 0 {
		return nil, fmt.Errorf("client: %w: no endpoints; want at least one host:port", fence.ErrInvalidArgument)
	}
	if o.requestTimeout <= 0 || o.requestTimeout > maxRequestTimeout {
		// Bounded so that a timeout plus a queue wait (at most
		// fence.MaxWait) cannot overflow.
		return nil, fmt.Errorf("client: %w: request timeout must be between 1ns and %v, got %v", fence.ErrInvalidArgument, maxRequestTimeout, o.requestTimeout)
	}
	c := &Client{
		httpClient:     o.httpClient,
		log:            o.log,
		clock:          newClock(o.clock),
		requestTimeout: o.requestTimeout,
		tls:            o.tls,
		token:          o.token,
		hooks:          o.hooks,
		followLeaderOn: !o.noFollowLeader,
		protocol:       o.protocol,
	}
	if o.protocol < ProtocolAuto || o.protocol > ProtocolConnect {
		return nil, fmt.Errorf("client: %w: %v; want ProtocolAuto, ProtocolNative or ProtocolConnect", fence.ErrInvalidArgument, o.protocol)
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.httpClient == nil {
		c.ownTransport = newTransport(c.tls)
		c.httpClient = &http.Client{Transport: c.ownTransport}
	}
	c.httpClient = c.wrapped(c.httpClient)
	for _, ep := range endpoints {
		base, err := baseURL(ep, o.tls != nil && o.httpClient == nil)
		if err != nil {
			return nil, err
		}
		u, _ := url.Parse(base)
		e := &endpoint{
			addr:       ep,
			url:        base,
			host:       u.Host,
			sessions:   fencedv1connect.NewSessionServiceClient(c.httpClient, base),
			locks:      fencedv1connect.NewLockServiceClient(c.httpClient, base),
			kv:         fencedv1connect.NewKVServiceClient(c.httpClient, base),
			cluster:    fencedv1connect.NewClusterServiceClient(c.httpClient, base),
			keys:       fencedv1connect.NewKeyServiceClient(c.httpClient, base),
			snapshots:  fencedv1connect.NewSnapshotServiceClient(c.httpClient, base),
			semaphores: fencedv1connect.NewSemaphoreServiceClient(c.httpClient, base),
			elections:  fencedv1connect.NewElectionServiceClient(c.httpClient, base),
			rwlocks:    fencedv1connect.NewRWLockServiceClient(c.httpClient, base),
			queues:     fencedv1connect.NewQueueServiceClient(c.httpClient, base),
		}
		e.pipe = &pipeline{c: c, ep: e}
		c.endpoints = append(c.endpoints, e)
	}
	c.ctx, c.cancel = context.WithCancelCause(context.Background())
	c.keeper = newKeeper(c)
	return c, nil
}

// Close ends the Client. Every session it created is lost at once: its
// Done channel closes, every grant's Context is cancelled, and the SDK asks
// the server to close the sessions, so their locks go to the next waiters
// now rather than when their TTL runs out: at most 32 at a time and all
// within one request timeout, after which the server expires the rest.
// Leases from Acquire are left to expire by their TTL. Calls in progress
// return ErrClosed. Close waits for the goroutines of the Client to end.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.cancel(ErrClosed)
		var closing []*Session
		for _, s := range c.keeper.all() {
			if s.lose(fmt.Errorf("session %d: %w", s.id, ErrClosed), false) {
				closing = append(closing, s)
			}
		}
		c.closeRemoteAll(closing)
		c.mu.Lock()
		c.stopping = true
		c.mu.Unlock()
		c.wg.Wait()
		if c.ownTransport != nil {
			c.ownTransport.CloseIdleConnections()
		}
	})
	return nil
}

// goRun runs f in a goroutine that Close waits for. It returns false, and
// does not run f, once Close has started waiting.
func (c *Client) goRun(f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopping {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
	return true
}

// newTransport returns an HTTP/2 transport that speaks cleartext HTTP/2
// (h2c, "prior knowledge") to http:// endpoints and HTTP/2 over TLS to
// https:// ones, and closes a connection whose peer stopped answering pings.
func newTransport(tc *tls.Config) *http.Transport {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 15 * time.Second}
	// Each transport gets a copy of its own, NextProtos included: setting
	// up HTTP/2 writes to the config.
	if tc != nil {
		tc = tc.Clone()
		tc.NextProtos = slices.Clone(tc.NextProtos)
	}
	t := &http.Transport{DialContext: d.DialContext, TLSClientConfig: tc}
	t.Protocols = new(http.Protocols)
	t.Protocols.SetUnencryptedHTTP2(true)
	t.Protocols.SetHTTP2(true)
	t.HTTP2 = &http.HTTP2Config{SendPingTimeout: 5 * time.Second, PingTimeout: 5 * time.Second}
	return t
}

// baseURL turns an endpoint into the base URL of its API: a bare
// host:port is reached over https when secure, http otherwise.
func baseURL(ep string, secure bool) (string, error) {
	raw := ep
	if !strings.Contains(raw, "://") {
		if secure {
			raw = "https://" + raw
		} else {
			raw = "http://" + raw
		}
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fmt.Errorf("client: %w: endpoint %q is not host:port or an http(s) URL", fence.ErrInvalidArgument, ep)
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}

// wrapped adds to hc what every request of the Client needs: the bearer
// token and following the leader.
func (c *Client) wrapped(hc *http.Client) *http.Client {
	return c.followingLeader(c.authorized(hc))
}

// endpoint returns the endpoint calls go to now and its index.
func (c *Client) endpoint() (int64, *endpoint) {
	i := c.cur.Load()
	return i, c.endpoints[i]
}

// failover moves calls from endpoint i to the next one, unless another call
// already moved them.
func (c *Client) failover(i int64) {
	next := (i + 1) % int64(len(c.endpoints))
	if c.cur.CompareAndSwap(i, next) && next != i {
		c.log.Info("fenced: failing over", "from", c.endpoints[i].addr, "to", c.endpoints[next].addr)
	}
}

// retry calls fn until it succeeds, fails with an error a retry cannot fix,
// or ctx ends. Each attempt gets attempt to run. After a transient failure
// the next attempt goes to the next endpoint; after a round of all
// endpoints it backs off. fn must be safe to repeat: every call the SDK
// makes carries the id (session and seq, or request id) that lets the
// server answer a repeat with the original result.
//
// When ctx ends, retry returns an error wrapping context.Cause(ctx).
func (c *Client) retry(ctx context.Context, op string, attempt time.Duration, fn func(ctx context.Context, ep *endpoint) error) error {
	const minBackoff, maxBackoff = 10 * time.Millisecond, time.Second
	backoff := minBackoff
	// last is the last failure of an attempt that ended on its own. The
	// failure of an attempt cut short by ctx ("write envelope: EOF") is a
	// symptom of the end of ctx, not a reason, and is not reported.
	var last error
	ended := func() error {
		if last == nil {
			return fmt.Errorf("%w (no answer yet)", context.Cause(ctx))
		}
		return fmt.Errorf("%w (last error: %v)", context.Cause(ctx), last)
	}
	for n := 1; ; n++ {
		i, ep := c.endpoint()
		actx := newAttempt(ctx, attempt)
		err := fn(actx, ep)
		actx.end()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ended()
		}
		err = wireconnect.Decode(err, wire.Call{})
		if !transient(err) {
			return err
		}
		last = err
		c.log.Debug("fenced: retrying", "op", op, "endpoint", ep.addr, "attempt", n, "err", err)
		c.hooks.retry(op, ep.addr, n, err)
		c.failover(i)
		if n%len(c.endpoints) != 0 {
			continue
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ended()
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// transient reports whether err may go away on a retry, possibly on
// another endpoint: the endpoint was unreachable, timed out, or is not the
// leader. err has been through wireconnect.Decode: a fence error the server
// reported is an answer, not a failure, except fence.ErrNotLeader. It is
// asked only while the caller's context is alive, so "canceled" is the
// transport's doing (connect reports a connection reset by the peer as
// canceled).
func transient(err error) bool {
	if errors.Is(err, fence.ErrNotLeader) {
		return true
	}
	if wireconnect.Decoded(err) {
		return false
	}
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable, connect.CodeDeadlineExceeded, connect.CodeAborted, connect.CodeCanceled:
		return true
	case connect.CodeUnknown:
		// A transport failure that connect did not classify.
		var ne net.Error
		return errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
	}
	return false
}

// until returns a context that ends when ctx ends, when the Client is
// closed, or at time t (if t is not zero), with the matching cause.
func (c *Client) until(ctx context.Context, t time.Time, cause error) (context.Context, context.CancelFunc) {
	cctx, cancel := context.WithCancelCause(ctx)
	stopClose := context.AfterFunc(c.ctx, func() { cancel(context.Cause(c.ctx)) })
	var timer Timer
	if !t.IsZero() {
		timer = c.clock.afterFunc(t.Sub(c.clock.Now()), func() { cancel(cause) })
	}
	return cctx, func() {
		stopClose()
		if timer != nil {
			timer.Stop()
		}
		cancel(context.Canceled)
	}
}

// closed returns ErrClosed once Close was called.
func (c *Client) closed() error {
	if c.ctx.Err() != nil {
		return ErrClosed
	}
	return nil
}

// cleanup returns a context for a best-effort request made after the
// caller's context ended (a release after a cancelled acquire): it keeps
// ctx's values, not its cancellation, and lasts one request timeout.
func (c *Client) cleanup(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), c.requestTimeout)
}
