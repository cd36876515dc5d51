package faultproxy_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/internal/bounded"
	"github.com/fenced-dev/fenced/internal/faultproxy"
)

// echoServer echoes every byte it receives and counts them.
type echoServer struct {
	ln       net.Listener
	received atomic.Int64

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func startEcho(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &echoServer{ln: ln, conns: make(map[net.Conn]struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns[c] = struct{}{}
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					s.received.Add(int64(n))
					if n > 0 {
						if _, err := c.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(s.Close)
	return s
}

func (s *echoServer) Addr() string { return s.ln.Addr().String() }

// Close closes the listener and every connection and waits for the
// server's goroutines.
func (s *echoServer) Close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func newProxy(t *testing.T, target string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// echo writes msg to c and reads it back, within timeout.
func echo(c net.Conn, msg string, timeout time.Duration) error {
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	if _, err := io.WriteString(c, msg); err != nil {
		return err
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != msg {
		return errors.New("echoed " + string(buf) + ", want " + msg)
	}
	return nil
}

func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// wantTimeout checks that an echo through c stalls until its 300ms
// deadline, as across a partition.
func wantTimeout(t *testing.T, c net.Conn) {
	t.Helper()
	start := time.Now()
	err := echo(c, "ping", 300*time.Millisecond)
	if !isTimeout(err) {
		t.Fatalf("echo()=%v, want a deadline error", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("echo() timed out after %v, want about 300ms", d)
	}
}

// wantFastError checks that an echo through c fails at once with an error
// other than a timeout.
func wantFastError(t *testing.T, c net.Conn) {
	t.Helper()
	start := time.Now()
	err := echo(c, "ping", 2*time.Second)
	if err == nil || isTimeout(err) {
		t.Fatalf("echo()=%v, want a connection error", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("echo() failed after %v, want at once", d)
	}
}

// wantDialFailsFast checks that a new connection to addr fails at once:
// either the dial fails (the reset can arrive before connect returns) or
// the first echo does.
func wantDialFailsFast(t *testing.T, addr string) {
	t.Helper()
	start := time.Now()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		if d := time.Since(start); d > time.Second || isTimeout(err) {
			t.Fatalf("dial failed after %v with %v, want a fast error", d, err)
		}
		return
	}
	defer c.Close()
	wantFastError(t, c)
}

func TestProxy_Pass(t *testing.T) {
	srv := startEcho(t)
	p := newProxy(t, srv.Addr())
	for range 3 {
		c := dial(t, p.Addr())
		if err := echo(c, "hello", time.Second); err != nil {
			t.Fatalf("echo()=%v, want nil", err)
		}
	}
}

func TestProxy_LargeTransfer(t *testing.T) {
	srv := startEcho(t)
	p := newProxy(t, srv.Addr())
	c := dial(t, p.Addr())
	msg := make([]byte, 1<<20)
	for i := range msg {
		msg[i] = byte(i)
	}
	if err := echo(c, string(msg), 5*time.Second); err != nil {
		t.Fatalf("echo(1MiB)=%v, want nil", err)
	}
}

func TestProxy_HalfClose(t *testing.T) {
	srv := startEcho(t)
	p := newProxy(t, srv.Addr())
	c := dial(t, p.Addr())
	c.SetDeadline(time.Now().Add(time.Second))
	io.WriteString(c, "bye")
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "bye" {
		t.Fatalf("ReadAll()=%q, %v, want %q, nil", got, err, "bye")
	}
}

func TestProxy_Blackhole(t *testing.T) {
	srv := startEcho(t)
	p := newProxy(t, srv.Addr())
	old := dial(t, p.Addr())
	if err := echo(old, "hello", time.Second); err != nil {
		t.Fatalf("echo()=%v, want nil", err)
	}

	p.SetMode(faultproxy.Blackhole)
	t.Run("existing", func(t *testing.T) { wantTimeout(t, old) })
	t.Run("new", func(t *testing.T) { wantTimeout(t, dial(t, p.Addr())) })

	p.SetMode(faultproxy.Pass)
	t.Run("existing after pass", func(t *testing.T) { wantFastError(t, old) })
	t.Run("new after pass", func(t *testing.T) {
		if err := echo(dial(t, p.Addr()), "again", time.Second); err != nil {
			t.Fatalf("echo()=%v, want nil", err)
		}
	})
}

func TestProxy_Reject(t *testing.T) {
	srv := startEcho(t)
	p := newProxy(t, srv.Addr())
	old := dial(t, p.Addr())
	if err := echo(old, "hello", time.Second); err != nil {
		t.Fatalf("echo()=%v, want nil", err)
	}

	p.SetMode(faultproxy.Reject)
	t.Run("existing", func(t *testing.T) { wantFastError(t, old) })
	t.Run("new", func(t *testing.T) { wantDialFailsFast(t, p.Addr()) })

	p.SetMode(faultproxy.Pass)
	t.Run("new after pass", func(t *testing.T) {
		if err := echo(dial(t, p.Addr()), "again", time.Second); err != nil {
			t.Fatalf("echo()=%v, want nil", err)
		}
	})
}

func TestProxy_TargetDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := newProxy(t, addr)
	wantDialFailsFast(t, p.Addr())
}

func TestProxy_SetDelay(t *testing.T) {
	srv := startEcho(t)
	p := newProxy(t, srv.Addr())
	c := dial(t, p.Addr())

	p.SetDelay(100 * time.Millisecond)
	start := time.Now()
	if err := echo(c, "slow", 2*time.Second); err != nil {
		t.Fatalf("echo()=%v, want nil", err)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("round trip took %v, want at least 200ms (100ms each way)", d)
	}

	p.SetDelay(0)
	start = time.Now()
	if err := echo(c, "fast", time.Second); err != nil {
		t.Fatalf("echo()=%v, want nil", err)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("round trip took %v after SetDelay(0), want under 100ms", d)
	}
}

func TestProxy_SetOneWay(t *testing.T) {
	tests := []struct {
		dir          faultproxy.Direction
		wantReceived bool // whether the server gets the bytes
	}{
		{faultproxy.ClientToServer, false},
		{faultproxy.ServerToClient, true},
	}
	for _, tt := range tests {
		t.Run(tt.dir.String(), func(t *testing.T) {
			srv := startEcho(t)
			p := newProxy(t, srv.Addr())
			c := dial(t, p.Addr())
			if err := echo(c, "hello", time.Second); err != nil {
				t.Fatalf("echo()=%v, want nil", err)
			}
			before := srv.received.Load()

			p.SetOneWay(tt.dir, true)
			wantTimeout(t, c)
			if got := srv.received.Load() > before; got != tt.wantReceived {
				t.Errorf("server received bytes=%v, want %v", got, tt.wantReceived)
			}

			p.SetOneWay(tt.dir, false)
			wantFastError(t, c)
			if err := echo(dial(t, p.Addr()), "again", time.Second); err != nil {
				t.Fatalf("echo() on a new connection=%v, want nil", err)
			}
		})
	}
}

// TestProxy_HTTP2Blackhole checks the partition an API client sees: an
// HTTP/2 request through a blackholed link times out on its context, and
// the same client recovers once the link passes again.
func TestProxy_HTTP2Blackhole(t *testing.T) {
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto)
	}))
	srv.Config.Protocols = &protos
	srv.Start()
	defer srv.Close()
	p := newProxy(t, srv.Listener.Addr().String())
	tr := &http.Transport{Protocols: &protos}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	get := func(timeout time.Duration) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.Addr()+"/", nil)
		if err != nil {
			return "", err
		}
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}

	if got, err := get(time.Second); err != nil || got != "HTTP/2.0" {
		t.Fatalf("get()=%q, %v, want %q, nil", got, err, "HTTP/2.0")
	}

	p.SetMode(faultproxy.Blackhole)
	start := time.Now()
	_, err := get(300 * time.Millisecond)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("get() in blackhole=%v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("get() in blackhole failed after %v, want about 300ms", d)
	}

	p.SetMode(faultproxy.Pass)
	deadline := time.Now().Add(2 * time.Second)
	for {
		got, err := get(300 * time.Millisecond)
		if err == nil && got == "HTTP/2.0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("get() after pass=%q, %v, want %q, nil", got, err, "HTTP/2.0")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestProxy_Concurrent changes the link's state while connections carry
// traffic, for the race detector, then checks the proxy still works.
func TestProxy_Concurrent(t *testing.T) {
	srv := startEcho(t)
	p := newProxy(t, srv.Addr())
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var c net.Conn
			for {
				select {
				case <-stop:
					if c != nil {
						c.Close()
					}
					return
				default:
				}
				if c == nil {
					var err error
					if c, err = net.DialTimeout("tcp", p.Addr(), time.Second); err != nil {
						continue
					}
				}
				if err := echo(c, "chatter", 30*time.Millisecond); err != nil {
					c.Close()
					c = nil
				}
			}
		}()
	}
	modes := []faultproxy.Mode{faultproxy.Blackhole, faultproxy.Pass, faultproxy.Reject, faultproxy.Pass}
	for i := range 40 {
		p.SetMode(modes[i%len(modes)])
		p.SetOneWay(faultproxy.Direction(i%2), i%3 == 0)
		p.SetDelay(time.Duration(i%3) * time.Millisecond)
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	bounded.Wait(t, "chatterers", time.Minute, &wg)

	p.SetMode(faultproxy.Pass)
	p.SetOneWay(faultproxy.ClientToServer, false)
	p.SetOneWay(faultproxy.ServerToClient, false)
	p.SetDelay(0)
	if err := echo(dial(t, p.Addr()), "after", time.Second); err != nil {
		t.Fatalf("echo()=%v, want nil", err)
	}
}

// TestProxy_Close checks that Close resets open connections, including
// blackholed, delayed and half-dead ones, and leaves no goroutine behind.
func TestProxy_Close(t *testing.T) {
	baseline := runtime.NumGoroutine()
	srv := startEcho(t)
	p, err := faultproxy.New(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	for range 3 {
		c := dial(t, p.Addr())
		if err := echo(c, "hello", time.Second); err != nil {
			t.Fatalf("echo()=%v, want nil", err)
		}
		conns = append(conns, c)
	}
	p.SetMode(faultproxy.Blackhole)
	conns = append(conns, dial(t, p.Addr())) // held, never reaches the server
	io.WriteString(conns[0], "lost")
	p.SetMode(faultproxy.Pass)
	p.SetOneWay(faultproxy.ServerToClient, true)
	p.SetDelay(time.Hour)
	conns = append(conns, dial(t, p.Addr()))
	io.WriteString(conns[1], "stuck in a delay")

	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close()=%v, want nil", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close() did not return")
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close()=%v, want nil", err)
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Error("dial after Close() succeeded, want an error")
	}
	for _, c := range conns {
		c.Close()
	}
	srv.Close()

	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > baseline {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("NumGoroutine()=%d, want at most %d\n%s",
				runtime.NumGoroutine(), baseline, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestListen(t *testing.T) {
	tests := []struct {
		listen  string
		wantErr error // nil: Listen succeeds
	}{
		{"127.0.0.1:0", nil},
		{"localhost:0", nil},
		{":0", faultproxy.ErrNotLoopback},
		{"0.0.0.0:0", faultproxy.ErrNotLoopback},
		{"192.0.2.1:0", faultproxy.ErrNotLoopback},
		{"[::]:0", faultproxy.ErrNotLoopback},
	}
	for _, tt := range tests {
		t.Run(tt.listen, func(t *testing.T) {
			p, err := faultproxy.Listen(tt.listen, "127.0.0.1:1")
			if err == nil {
				p.Close()
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Listen(%q)=%v, want %v", tt.listen, err, tt.wantErr)
			}
		})
	}

	for _, bad := range []string{"127.0.0.1", "127.0.0.1:0:0"} {
		if _, err := faultproxy.Listen(bad, "127.0.0.1:1"); err == nil {
			t.Errorf("Listen(%q)=nil, want an error", bad)
		}
		if _, err := faultproxy.Listen("127.0.0.1:0", bad); err == nil {
			t.Errorf("Listen(target %q)=nil, want an error", bad)
		}
	}
}
