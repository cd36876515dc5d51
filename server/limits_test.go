package server_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/internal/testserver"
	"github.com/fenced-dev/fenced/internal/wire"
	"github.com/fenced-dev/fenced/internal/wire/wireconnect"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
	"github.com/fenced-dev/fenced/server"
)

func withLimits(f func(l *server.Limits)) testserver.Option {
	return func(c *server.Config) { f(&c.Limits) }
}

// closedWithin reports how long c took to be closed by the server
// (a read returning an error), failing the test after max.
func closedWithin(t *testing.T, c net.Conn, max time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	c.SetReadDeadline(start.Add(max))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open after %v", max)
	}
	return time.Since(start)
}

func TestLimits_SilentConnectionClosedAfterHeaderTimeout(t *testing.T) {
	srv := testserver.Start(t, withLimits(func(l *server.Limits) { l.ReadHeaderTimeout = 300 * time.Millisecond }))
	c, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if d := closedWithin(t, c, 5*time.Second); d < 200*time.Millisecond {
		t.Fatalf("closed after %v, before the header timeout", d)
	}
}

func TestLimits_IdleHTTP1ConnectionClosed(t *testing.T) {
	srv := testserver.Start(t, withLimits(func(l *server.Limits) { l.IdleTimeout = 300 * time.Millisecond }))
	c, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: fenced\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	start := time.Now()
	c.SetReadDeadline(start.Add(5 * time.Second))
	if _, err := br.ReadByte(); err == nil || time.Since(start) >= 5*time.Second {
		t.Fatalf("idle HTTP/1 connection not closed: %v after %v", err, time.Since(start))
	}
}

// trackingConn records when the server closed the connection.
type trackingConn struct {
	net.Conn
	once   sync.Once
	closed chan struct{}
}

func (c *trackingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		c.once.Do(func() { close(c.closed) })
	}
	return n, err
}

// h2cClient returns a client speaking HTTP/2 without TLS (prior knowledge)
// whose connections are sent on conns as they are dialled.
func h2cClient(conns chan<- *trackingConn) *http.Client {
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc := &trackingConn{Conn: c, closed: make(chan struct{})}
		if conns != nil {
			conns <- tc
		}
		return tc, nil
	}
	return &http.Client{Transport: tr}
}

func TestLimits_IdleH2CConnectionClosedButStreamsAndWaitsAreNot(t *testing.T) {
	srv := testserver.Start(t, withLimits(func(l *server.Limits) {
		l.IdleTimeout = 300 * time.Millisecond
		l.BodyTimeout = 300 * time.Millisecond
	}))
	conns := make(chan *trackingConn, 4)
	hc := h2cClient(conns)
	base := "http://" + srv.Addr()
	sessions := fencedv1connect.NewSessionServiceClient(hc, base)
	locks := fencedv1connect.NewLockServiceClient(hc, base)
	ctx := context.Background()
	var ids []uint64
	for range 2 {
		r, err := sessions.CreateSession(ctx, connect.NewRequest(&fencedv1.CreateSessionRequest{TtlMs: 10000}))
		if err != nil {
			t.Fatal(err)
		}
		secrets.Store(r.Msg.Session, r.Msg.Secret)
		ids = append(ids, r.Msg.Session)
	}
	if _, err := locks.Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: "idle", Session: ids[0], Secret: secretOf(ids[0])})); err != nil {
		t.Fatal(err)
	}
	c := <-conns
	// A waiting acquire outlives the idle and body timeouts several times.
	start := time.Now()
	r, err := locks.Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: "idle", Session: ids[1], Secret: secretOf(ids[1]), WaitMs: 1500}))
	if err != nil || r.Msg.Granted || time.Since(start) < 1400*time.Millisecond {
		t.Fatalf("waiting acquire: %v, %+v after %v; want not granted after its 1.5s wait", err, r, time.Since(start))
	}
	select {
	case <-c.closed:
		t.Fatal("connection closed while a call was in flight")
	default:
	}
	// With nothing in flight the connection is closed after the idle timeout.
	select {
	case <-c.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("idle h2c connection not closed after 5s")
	}
}

func TestLimits_DribbledBodyCut(t *testing.T) {
	srv := testserver.Start(t, withLimits(func(l *server.Limits) { l.BodyTimeout = 500 * time.Millisecond }))
	t.Run("http1", func(t *testing.T) {
		c, err := net.Dial("tcp", srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		body := `{"name":"` + strings.Repeat("x", 80) + `"}`
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: fenced\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", fencedv1connect.LockServiceDescribeProcedure, len(body))
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			for i := 0; i < len(body); i++ {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
				if _, err := c.Write([]byte{body[i]}); err != nil {
					return
				}
			}
		}()
		if d := closedWithin(t, c, 5*time.Second); d < 400*time.Millisecond {
			t.Fatalf("cut after %v, before the body timeout", d)
		}
	})
	t.Run("h2c", func(t *testing.T) {
		pr, pw := io.Pipe()
		go func() {
			for i := 0; i < 100; i++ {
				if _, err := pw.Write([]byte{'x'}); err != nil {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
			pw.Close()
		}()
		defer pw.Close()
		req, _ := http.NewRequest(http.MethodPost, "http://"+srv.Addr()+fencedv1connect.LockServiceDescribeProcedure, pr)
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		done := make(chan error, 1)
		go func() {
			resp, err := h2cClient(nil).Do(req)
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err == nil && resp.StatusCode == http.StatusOK {
					err = errors.New("200 OK")
				}
				if err == nil {
					err = fmt.Errorf("status %d", resp.StatusCode)
				}
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || time.Since(start) < 400*time.Millisecond {
				t.Fatalf("dribbled h2c body: %v after %v; want cut after the body timeout", err, time.Since(start))
			}
		case <-time.After(5 * time.Second):
			t.Fatal("dribbled h2c body still read after 5s")
		}
	})
}

// metric returns the value of a sample line of /metrics starting with
// name (labels included).
func metric(t *testing.T, addr, name string) string {
	t.Helper()
	return testserver.Metric(t, addr, name)
}

// dropReadyzConns closes the idle connections testserver.Start polled
// /readyz on, so that they no longer count against the caps.
func dropReadyzConns() {
	http.DefaultClient.CloseIdleConnections()
	time.Sleep(100 * time.Millisecond)
}

func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// isOpen reports whether the server keeps c open: it answers a request.
func isOpen(c net.Conn) bool {
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: fenced\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func TestLimits_ConnectionsPerSource(t *testing.T) {
	srv := testserver.Start(t, withLimits(func(l *server.Limits) { l.MaxConnsPerSource = 2 }))
	dropReadyzConns()
	a, b := dialFrom(t, "127.0.0.1", srv.Addr()), dialFrom(t, "127.0.0.1", srv.Addr())
	if !isOpen(a) || !isOpen(b) {
		t.Fatal("connections within the cap refused")
	}
	if isOpen(dialFrom(t, "127.0.0.1", srv.Addr())) {
		t.Fatal("third connection from one source served; want it closed")
	}
	// Another source has its own count.
	if !isOpen(dialFrom(t, "127.0.0.2", srv.Addr())) {
		t.Fatal("connection from another source refused")
	}
	// A closed connection frees its place.
	a.Close()
	time.Sleep(50 * time.Millisecond)
	if got := metric(t, srv.Addr(), `fenced_api_connections_refused_total{cap="per_source"}`); got != "1" {
		t.Fatalf("refused per_source = %q, want 1", got)
	}
}

func TestLimits_ConnectionsInTotal(t *testing.T) {
	srv := testserver.Start(t, withLimits(func(l *server.Limits) { l.MaxConns = 2; l.MaxConnsPerSource = 0 }))
	dropReadyzConns()
	a := dialFrom(t, "127.0.0.1", srv.Addr())
	b := dialFrom(t, "127.0.0.2", srv.Addr())
	if !isOpen(a) || !isOpen(b) {
		t.Fatal("connections within the cap refused")
	}
	if isOpen(dialFrom(t, "127.0.0.3", srv.Addr())) {
		t.Fatal("third connection served; want it closed")
	}
	b.Close()
	time.Sleep(50 * time.Millisecond)
	if got := metric(t, srv.Addr(), `fenced_api_connections_refused_total{cap="total"}`); got != "1" {
		t.Fatalf("refused total = %q, want 1", got)
	}
}

// wantLimit checks err is ResourceExhausted with reason limit-exceeded, a
// message naming flag, and decodes to fence.ErrLimitExceeded.
func wantLimit(t *testing.T, err error, flag string) {
	t.Helper()
	if connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("err = %v, want ResourceExhausted", err)
	}
	if !errors.Is(wireconnect.Decode(err, wire.Call{}), fence.ErrLimitExceeded) {
		t.Fatalf("err = %v does not decode to ErrLimitExceeded", err)
	}
	if !strings.Contains(err.Error(), "--"+flag) {
		t.Fatalf("err = %v, want the message to name --%s", err, flag)
	}
}

func TestLimits_QuotasPerSource(t *testing.T) {
	srv := testserver.Start(t, withLimits(func(l *server.Limits) {
		l.MaxSessionsPerSource, l.MaxGrantsPerSource, l.MaxWaitersPerSource = 3, 1, 1
	}))
	hc := h2cClient(nil)
	base := "http://" + srv.Addr()
	sessions := fencedv1connect.NewSessionServiceClient(hc, base)
	locks := fencedv1connect.NewLockServiceClient(hc, base)
	ctx := context.Background()
	create := func() (uint64, error) {
		r, err := sessions.CreateSession(ctx, connect.NewRequest(&fencedv1.CreateSessionRequest{TtlMs: 10000}))
		if err != nil {
			return 0, err
		}
		secrets.Store(r.Msg.Session, r.Msg.Secret)
		return r.Msg.Session, nil
	}
	acq := func(s uint64, name string, waitMs int64) error {
		_, err := locks.Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: name, Session: s, Secret: secretOf(s), WaitMs: waitMs, TtlMs: 10000}))
		return err
	}
	s1, _ := create()
	s2, _ := create()
	if err := acq(s1, "a", 0); err != nil {
		t.Fatal(err)
	}
	wantLimit(t, acq(s2, "b", 0), "max-grants-per-source")
	// Queue s2 behind s1 on a: its one place in a queue.
	waitDone := make(chan error, 1)
	go func() { waitDone <- acq(s2, "a", 2000) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		d, err := locks.Describe(ctx, connect.NewRequest(&fencedv1.DescribeRequest{Name: "a"}))
		if err == nil && len(d.Msg.Lock.Waiters) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("s2 never queued")
		}
		time.Sleep(10 * time.Millisecond)
	}
	s3, err := create()
	if err != nil {
		t.Fatal(err)
	}
	wantLimit(t, acq(s3, "a", 1000), "max-waiters-per-source")
	_, err = create()
	wantLimit(t, err, "max-sessions-per-source")
	// A per-grant session counts as a session.
	wantLimit(t, acq(0, "c", 0), "max-sessions-per-source")
	if err := <-waitDone; err != nil {
		t.Fatalf("queued acquire: %v", err)
	}
	if got := metric(t, srv.Addr(), `fenced_limit_rejections_total{limit="sessions"}`); got != "2" {
		t.Fatalf("rejections{sessions} = %q, want 2", got)
	}
}

func TestLimits_SessionRate(t *testing.T) {
	srv := testserver.Start(t, withLimits(func(l *server.Limits) { l.SessionRate, l.SessionBurst = 0.5, 3 }))
	sessions := fencedv1connect.NewSessionServiceClient(h2cClient(nil), "http://"+srv.Addr())
	ctx := context.Background()
	for i := range 3 {
		if _, err := sessions.CreateSession(ctx, connect.NewRequest(&fencedv1.CreateSessionRequest{TtlMs: 10000})); err != nil {
			t.Fatalf("create %d within the burst: %v", i, err)
		}
	}
	_, err := sessions.CreateSession(ctx, connect.NewRequest(&fencedv1.CreateSessionRequest{TtlMs: 10000}))
	wantLimit(t, err, "session-rate")
}

func TestLimits_KVKeys(t *testing.T) {
	srv := testserver.Start(t, withLimits(func(l *server.Limits) { l.MaxKVKeys = 1 }))
	hc := h2cClient(nil)
	base := "http://" + srv.Addr()
	ctx := context.Background()
	g, err := fencedv1connect.NewLockServiceClient(hc, base).Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: "kv", TtlMs: 10000}))
	if err != nil {
		t.Fatal(err)
	}
	kv := fencedv1connect.NewKVServiceClient(hc, base)
	put := func(key string) error {
		_, err := kv.Put(ctx, connect.NewRequest(&fencedv1.KVPutRequest{Key: key, Value: []byte("v"), Token: g.Msg.Grant.Token}))
		return err
	}
	if err := put("kv/one"); err != nil {
		t.Fatal(err)
	}
	if err := put("kv/one"); err != nil {
		t.Fatalf("overwrite at the key limit: %v", err)
	}
	wantLimit(t, put("kv/two"), "max-kv-keys")
	r := kvDo(t, http.MethodPut, base+"/v1/kv/kv/three", map[string]string{"X-Fencing-Token": fmt.Sprint(g.Msg.Grant.Token)}, []byte("v"))
	if r.status != http.StatusInsufficientStorage {
		t.Fatalf("PUT /v1/kv/three: %d %s, want 507", r.status, r.raw)
	}
}
