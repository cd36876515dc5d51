package faultproxy

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// bufSize is the size of the one buffer each direction of a connection
// reads into. It bounds what the Proxy holds per direction.
const bufSize = 32 << 10

// link is one proxied connection: the accepted client side and, once
// dialed, the server side.
type link struct {
	client net.Conn
	// ctx is cancelled when the link is reset (or has ended); it stops the
	// dial and any delay in progress.
	ctx    context.Context
	cancel context.CancelFunc

	// Guarded by Proxy.mu.
	server  net.Conn
	isReset bool
}

func newLink(c net.Conn) *link {
	ctx, cancel := context.WithCancel(context.Background())
	return &link{client: c, ctx: ctx, cancel: cancel}
}

// resetLocked resets both sides of the link. The caller holds Proxy.mu.
func (l *link) resetLocked() {
	if l.isReset {
		return
	}
	l.isReset = true
	l.cancel()
	resetConn(l.client)
	if l.server != nil {
		resetConn(l.server)
	}
}

func (p *Proxy) reset(l *link) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l.resetLocked()
}

// resetConn closes c, with a TCP RST rather than a FIN where possible.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// hold keeps a connection that never reaches the target open, discarding
// what the client sends, until the link is reset.
func (p *Proxy) hold(l *link) {
	p.pipe(l, ClientToServer, nil, l.client)
	<-l.ctx.Done()
}

// forward dials the target and copies bytes both ways until both
// directions have ended or the link is reset.
func (p *Proxy) forward(l *link) {
	var d net.Dialer
	s, err := d.DialContext(l.ctx, "tcp", p.target)
	if err != nil {
		// The target is down, or the link was reset while dialing: the
		// client sees a reset, as it would from a refused connection.
		p.reset(l)
		return
	}
	p.mu.Lock()
	if l.isReset {
		p.mu.Unlock()
		resetConn(s)
		return
	}
	l.server = s
	p.mu.Unlock()

	var (
		wg       sync.WaitGroup
		c2sEnded bool
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		c2sEnded = p.pipe(l, ClientToServer, s, l.client)
	}()
	s2cEnded := p.pipe(l, ServerToClient, l.client, s)
	wg.Wait()
	if !c2sEnded || !s2cEnded {
		// An end of stream was lost to a block: the connection stays
		// half dead, as across a partition, until it is reset.
		<-l.ctx.Done()
		return
	}
	_ = l.client.Close()
	_ = s.Close()
}

// pipe copies from src to dst (nil: nowhere) in direction dir until src
// ends. It reports whether src's end of stream was passed on to dst as a
// half close. It reports false if the link was reset, or if the end of
// stream was lost because dir was blocked; the link then waits for a reset.
func (p *Proxy) pipe(l *link, dir Direction, dst, src net.Conn) bool {
	buf := make([]byte, bufSize)
	for {
		n, err := src.Read(buf)
		if n > 0 && dst != nil && !p.blocked(dir) {
			if !p.sleep(l) {
				return false
			}
			// The link may have been blocked during the delay. If it
			// was unblocked as well, it was reset and Write fails.
			if !p.blocked(dir) {
				if _, err := dst.Write(buf[:n]); err != nil {
					p.reset(l)
					return false
				}
			}
		}
		if err == nil {
			continue
		}
		switch {
		case l.ctx.Err() != nil:
			return false
		case dst == nil || p.blocked(dir):
			// The FIN or RST is dropped with the rest of the bytes.
			return false
		case errors.Is(err, io.EOF):
			if cw, ok := dst.(interface{ CloseWrite() error }); ok {
				_ = cw.CloseWrite()
			}
			return true
		default:
			p.reset(l)
			return false
		}
	}
}

// sleep waits for the delay set by SetDelay. It returns false if the link
// was reset meanwhile.
func (p *Proxy) sleep(l *link) bool {
	d := time.Duration(p.delay.Load())
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-l.ctx.Done():
		return false
	}
}
