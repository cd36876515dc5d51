package server

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenced-dev/fenced/fsm"
)

// Limits bounds what a client can make the server hold: connections, time
// on a connection, sessions, grants, waiters and the rate of new sessions.
// Each is a flag of fenced serve (named in the field's doc); 0 turns a
// limit off. The README section "Limits and failure behaviour" lists them
// with what a client sees when it hits one.
type Limits struct {
	// ReadHeaderTimeout bounds reading a request's headers
	// (--read-header-timeout). Default 10s.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a connection, HTTP/1 or HTTP/2 (h2c included),
	// that has had no request in flight for this long, or a native one
	// without a stream (--idle-timeout).
	// Default 2m.
	IdleTimeout time.Duration
	// BodyTimeout bounds reading the body of a unary request
	// (--body-timeout); a body dribbled slower is cut and its connection
	// closed. Streams (Pipeline, KeepAlive) are exempt: they stay open
	// for as long as their client uses them, and a waiting acquire for
	// as long as it waits. Default 30s.
	BodyTimeout time.Duration
	// PingInterval makes the server ping an HTTP/2 connection it has
	// heard nothing on for this long, and close it when the ping is not
	// answered within PingTimeout (--ping-interval, --ping-timeout): a
	// client that vanished without closing its connection (streams
	// included) is noticed. Defaults 1m and 15s.
	PingInterval time.Duration
	PingTimeout  time.Duration
	// MaxConns caps the open API connections (--max-conns); a connection
	// over the cap is closed at once. Default 10000.
	MaxConns int
	// MaxConnsPerSource caps the open API connections from one source
	// address (--max-conns-per-source). Default 1000.
	MaxConnsPerSource int
	// MaxSessionsPerSource caps the live sessions charged to one source
	// (--max-sessions-per-source); per-grant sessions count. Default 10000.
	MaxSessionsPerSource uint32
	// MaxGrantsPerSource caps the grants held by the sessions of one
	// source (--max-grants-per-source). A queued acquire admitted earlier
	// is granted even above it. Default 10000.
	MaxGrantsPerSource uint32
	// MaxWaitersPerSource caps the queued acquires of the sessions of one
	// source (--max-waiters-per-source). Default 10000.
	MaxWaitersPerSource uint32
	// SessionRate and SessionBurst rate-limit session creation per source
	// (a token bucket: SessionRate per second, up to SessionBurst at once;
	// --session-rate, --session-burst). Per-grant sessions count. Default
	// 500/s, burst 1000.
	SessionRate  float64
	SessionBurst int
	// MaxKVKeys and MaxKVBytes bound the fenced kv as a whole: its keys,
	// deleted ones included (they keep their watermark), and the bytes of
	// its keys and values (--max-kv-keys, --max-kv-bytes). A write that
	// would grow it past either is refused. Defaults 100000 and 256 MiB.
	MaxKVKeys  uint64
	MaxKVBytes uint64
	// MaxElectionValueBytes caps the value of an election's candidate or
	// leader (--max-election-value-bytes); a larger campaign or proclaim
	// is refused. 0 means the state machine's own cap,
	// fsm.MaxElectionValueBytes (64 KiB), which is also the most it may
	// be. Default 4096.
	MaxElectionValueBytes int
	// MaxLatchCount caps the count a latch generation starts with
	// (--max-latch-count); each count-down's request id is kept until the
	// generation ends, so it bounds a latch's memory. Default 100000; 0
	// leaves the state machine's own cap, 1000000.
	MaxLatchCount uint64
	// MaxLimiterQueue caps the queue a rate limiter may be configured with
	// (--max-limiter-queue): how many takes wait for permits at once.
	// Default 1000; 0 leaves the state machine's own cap, 10000.
	MaxLimiterQueue uint32
	// DisableNative turns off the native protocol of the Go SDK on the API
	// port (--native=false); the SDK then uses Connect. Default on.
	DisableNative bool
	// NativeMaxFrameBytes caps the payload of a native frame
	// (--native-max-frame-bytes); a larger frame closes its connection
	// with an error. Default 0: the Connect Pipeline's message limit, 1 MiB
	// (a kv value) plus --max-message-bytes.
	NativeMaxFrameBytes int
	// NativeMaxStreams caps the open streams of one native connection
	// (--native-max-streams); a stream over it is ended with
	// ResourceExhausted. The SDK opens two. Default 16.
	NativeMaxStreams int
}

// DefaultLimits returns the default limits.
func DefaultLimits() Limits {
	return Limits{
		ReadHeaderTimeout:    10 * time.Second,
		IdleTimeout:          2 * time.Minute,
		BodyTimeout:          30 * time.Second,
		PingInterval:         time.Minute,
		PingTimeout:          15 * time.Second,
		MaxConns:             10000,
		MaxConnsPerSource:    1000,
		MaxSessionsPerSource: 10000,
		MaxGrantsPerSource:   10000,
		MaxWaitersPerSource:  10000,
		SessionRate:          500,
		SessionBurst:         1000,
		MaxKVKeys:            100000,
		MaxKVBytes:           256 << 20,

		MaxElectionValueBytes: 4096,
		MaxLatchCount:         100000,
		MaxLimiterQueue:       1000,
		NativeMaxStreams:      16,
	}
}

// validate reports every negative limit, and a rate without a burst.
func (l Limits) validate() []error {
	var errs []error
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"read-header-timeout", l.ReadHeaderTimeout}, {"idle-timeout", l.IdleTimeout}, {"body-timeout", l.BodyTimeout}, {"ping-interval", l.PingInterval}, {"ping-timeout", l.PingTimeout}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("--%s %v is negative; want 0 (off) or more", d.flag, d.v))
		}
	}
	for _, n := range []struct {
		flag string
		v    int
	}{{"max-conns", l.MaxConns}, {"max-conns-per-source", l.MaxConnsPerSource}, {"session-burst", l.SessionBurst}, {"native-max-frame-bytes", l.NativeMaxFrameBytes}, {"native-max-streams", l.NativeMaxStreams}} {
		if n.v < 0 {
			errs = append(errs, fmt.Errorf("--%s %d is negative; want 0 (no limit) or more", n.flag, n.v))
		}
	}
	if l.MaxElectionValueBytes < 0 || l.MaxElectionValueBytes > fsm.MaxElectionValueBytes {
		errs = append(errs, fmt.Errorf("--max-election-value-bytes %d is out of range; want 0 (the most, %d) to %d", l.MaxElectionValueBytes, fsm.MaxElectionValueBytes, fsm.MaxElectionValueBytes))
	}
	if l.SessionRate < 0 {
		errs = append(errs, fmt.Errorf("--session-rate %v is negative; want 0 (no limit) or more", l.SessionRate))
	}
	if l.SessionRate > 0 && l.SessionBurst < 1 {
		errs = append(errs, fmt.Errorf("--session-burst %d: a session rate needs a burst of at least 1", l.SessionBurst))
	}
	return errs
}

// electionValueLimit is the largest election value a request may carry.
func (l Limits) electionValueLimit() int {
	if l.MaxElectionValueBytes == 0 {
		return fsm.MaxElectionValueBytes
	}
	return l.MaxElectionValueBytes
}

// configureHTTP sets the connection timeouts of hs. There is no
// http.Server ReadTimeout or WriteTimeout: they would cut streams and
// waiting acquires, which may last hours; unary bodies are bounded by
// bodyDeadline instead.
func (l Limits) configureHTTP(hs *http.Server) {
	hs.ReadHeaderTimeout = l.ReadHeaderTimeout
	hs.IdleTimeout = l.IdleTimeout
	hs.HTTP2 = &http.HTTP2Config{SendPingTimeout: l.PingInterval, PingTimeout: l.PingTimeout}
}

// listen opens the API listener under the connection caps, and sets up
// the limits' metrics and the session rate.
func (s *Server) listen() (net.Listener, error) {
	tcp, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", s.cfg.Listen, err)
	}
	l := s.cfg.Limits
	s.limitMetrics = newLimitMetrics(s.metrics.registry)
	ln := newLimitListener(tcp, l.MaxConns, l.MaxConnsPerSource, func(cap string) {
		s.limitMetrics.connsRefused.WithLabelValues(cap).Inc()
	})
	s.metrics.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fenced_api_connections_open", Help: "Open API connections.",
	}, func() float64 { return float64(ln.open()) }))
	s.sessionRate = newRateLimiter(l.SessionRate, l.SessionBurst, time.Now)
	return ln, nil
}

// errBodyTimeout reports a request body that did not arrive in time.
var errBodyTimeout = errors.New("request body not received in time")

// bodyDeadline bounds the time a unary request's body may take to arrive:
// when it has not been read to its end after BodyTimeout, the read
// deadline of its connection (HTTP/1) or stream (HTTP/2) is set to now,
// which fails the read and frees the handler; an HTTP/1 connection is
// closed. Once the body is read nothing is cut: a waiting acquire may
// wait as long as its wait_ms.
func (s *Server) bodyDeadline(next http.Handler) http.Handler {
	timeout := s.cfg.Limits.BodyTimeout
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if timeout <= 0 || clientStreamPaths[r.URL.Path] || r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		b := &timedBody{ReadCloser: r.Body, timeout: timeout}
		rc := http.NewResponseController(w)
		b.timer = time.AfterFunc(timeout, func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			if b.done.Load() || b.returned {
				return
			}
			b.expired.Store(true)
			s.limitMetrics.bodyTimeouts.Inc()
			_ = rc.SetReadDeadline(time.Now())
		})
		defer func() {
			// Once the handler returned, the connection may serve the next
			// request: the deadline must not be set after this.
			b.mu.Lock()
			b.returned = true
			b.mu.Unlock()
			b.timer.Stop()
		}()
		r.Body = b
		next.ServeHTTP(w, r)
	})
}

// timedBody is a request body read under bodyDeadline.
type timedBody struct {
	io.ReadCloser
	timeout time.Duration
	timer   *time.Timer
	done    atomic.Bool // read to its end
	expired atomic.Bool // the deadline was set

	mu       sync.Mutex
	returned bool // the handler returned
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case errors.Is(err, io.EOF):
		b.done.Store(true)
		b.timer.Stop()
	case err != nil && b.expired.Load():
		err = fmt.Errorf("%w: the body took longer than %v (fenced serve --body-timeout): %v", errBodyTimeout, b.timeout, err)
	}
	return n, err
}

// limitMetrics count what the limits refused.
type limitMetrics struct {
	connsRefused *prometheus.CounterVec
	rejections   *prometheus.CounterVec
	bodyTimeouts prometheus.Counter
}

func newLimitMetrics(reg prometheus.Registerer) *limitMetrics {
	m := &limitMetrics{
		connsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenced_api_connections_refused_total", Help: "API connections closed at once because a cap was reached, by cap: total (--max-conns) or per_source (--max-conns-per-source).",
		}, []string{"cap"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenced_limit_rejections_total", Help: "Requests refused with ResourceExhausted by a limit: sessions, grants, waiters (per source), session_rate, kv_keys, kv_bytes, queue_items, queue_bytes.",
		}, []string{"limit"}),
		bodyTimeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenced_request_body_timeouts_total", Help: "Unary requests cut because their body did not arrive within --body-timeout.",
		}),
	}
	reg.MustRegister(m.connsRefused, m.rejections, m.bodyTimeouts)
	return m
}
