package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenced-dev/fenced/internal/nativewire"
)

// nativeListener hands the API listener's connections to net/http,
// except those that open the native protocol, which it serves itself.
type nativeListener struct {
	net.Listener
	s     *Server
	conns chan net.Conn
	done  chan struct{}
	err   error // why the listener stopped; set before done is closed
}

// nativeListen wraps the API listener ln (cleartext with read buffers,
// or TLS) so that it serves the native protocol beside HTTP.
func (s *Server) nativeListen(ln net.Listener) net.Listener {
	l := &nativeListener{Listener: ln, s: s, conns: make(chan net.Conn), done: make(chan struct{})}
	s.metrics.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fenced_api_native_connections_open", Help: "Open API connections of the native protocol (counted in fenced_api_connections_open too).",
	}, func() float64 { return float64(s.natives.open()) }))
	go l.acceptLoop()
	return l
}

// Accept implements net.Listener: the next connection that is not native.
func (l *nativeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, l.err
	}
}

func (l *nativeListener) acceptLoop() {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			l.err = err
			close(l.done)
			return
		}
		go l.sniff(c)
	}
}

// sniff tells a native connection from an HTTP one, without reading
// anything an HTTP connection needs: over TLS by the protocol ALPN chose,
// in cleartext by the first byte, which no HTTP request starts with.
func (l *nativeListener) sniff(c net.Conn) {
	timeout := l.s.cfg.Limits.ReadHeaderTimeout
	if timeout <= 0 {
		timeout = nativeHandshakeTimeout
	}
	deadline := time.Now().Add(timeout)
	switch conn := c.(type) {
	case *tls.Conn:
		_ = conn.SetDeadline(deadline)
		ctx, cancel := context.WithDeadline(l.s.ctx, deadline)
		err := conn.HandshakeContext(ctx)
		cancel()
		_ = conn.SetDeadline(time.Time{})
		// A failed handshake goes to net/http too, which logs it.
		if err == nil && conn.ConnectionState().NegotiatedProtocol == nativewire.ALPN {
			state := conn.ConnectionState()
			l.s.serveNative(conn, bufio.NewReaderSize(conn, readBufferSize), &state, deadline)
			return
		}
	case *readBufConn:
		_ = conn.SetReadDeadline(deadline)
		b, err := conn.r.Peek(1)
		if err != nil {
			conn.Close()
			return
		}
		if b[0] == nativewire.Preface[0] {
			p, err := conn.r.Peek(len(nativewire.Preface))
			if err != nil || string(p) != nativewire.Preface {
				l.s.refuseNative(conn, connect.CodeInvalidArgument, fmt.Sprintf("not the native protocol's preface %q", nativewire.Preface), "")
				return
			}
			_, _ = conn.r.Discard(len(p))
			l.s.serveNative(conn, conn.r, nil, deadline)
			return
		}
		_ = conn.SetReadDeadline(time.Time{})
	}
	select {
	case l.conns <- c:
	case <-l.done:
		c.Close()
	}
}

// nativeConns are the open native connections, closed by Shutdown.
type nativeConns struct {
	mu     sync.Mutex
	m      map[*nativeConn]struct{}
	closed bool
}

func (n *nativeConns) add(nc *nativeConn) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return false
	}
	if n.m == nil {
		n.m = make(map[*nativeConn]struct{})
	}
	n.m[nc] = struct{}{}
	return true
}

func (n *nativeConns) remove(nc *nativeConn) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.m, nc)
}

// open returns the number of open native connections.
func (n *nativeConns) open() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.m)
}

// closeAll closes every native connection, and those that open later.
func (n *nativeConns) closeAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	for nc := range n.m {
		nc.c.Close()
	}
}
