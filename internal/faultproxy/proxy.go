package faultproxy

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ErrNotLoopback is returned by Listen for a listen address whose host is not
// a loopback address.
var ErrNotLoopback = errors.New("faultproxy: listen address is not loopback")

// Proxy forwards TCP connections from a loopback listen address to a target.
// Its methods are safe for concurrent use. Create one with New or Listen and
// release it with Close.
type Proxy struct {
	target string
	ln     net.Listener
	delay  atomic.Int64 // a time.Duration; see SetDelay

	mu     sync.Mutex
	mode   Mode
	oneWay [2]bool // indexed by Direction
	links  map[*link]struct{}
	closed bool
	done   chan struct{} // closed by Close

	wg sync.WaitGroup // the accept loop and one goroutine per connection
}

// New returns a Proxy listening on 127.0.0.1 on a free port and forwarding
// to target. It is Listen("127.0.0.1:0", target).
func New(target string) (*Proxy, error) {
	return Listen("127.0.0.1:0", target)
}

// Listen returns a Proxy listening on the address listen and forwarding to
// target, both "host:port". The host of listen must be a loopback address
// or "localhost"; otherwise Listen returns an error matching ErrNotLoopback.
// The target is dialed for each accepted connection, not by Listen, so it
// need not be up yet: while it is down, accepted connections are reset.
func Listen(listen, target string) (*Proxy, error) {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen address: %w", err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("%w: %q", ErrNotLoopback, listen)
	}
	if _, _, err := net.SplitHostPort(target); err != nil {
		return nil, fmt.Errorf("faultproxy: target address: %w", err)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: %w", err)
	}
	p := &Proxy{
		target: target,
		ln:     ln,
		links:  make(map[*link]struct{}),
		done:   make(chan struct{}),
	}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr returns the address the Proxy listens on, such as "127.0.0.1:41234".
// Peers dial it instead of the target.
func (p *Proxy) Addr() string {
	return p.ln.Addr().String()
}

// Close stops the Proxy: it closes the listener, resets every open
// connection and waits until every goroutine the Proxy started has returned.
// Close is idempotent; calls after the first return nil.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.wg.Wait()
		return nil
	}
	p.closed = true
	close(p.done)
	err := p.ln.Close()
	for l := range p.links {
		l.resetLocked()
	}
	p.mu.Unlock()
	p.wg.Wait()
	if err != nil {
		return fmt.Errorf("faultproxy: close: %w", err)
	}
	return nil
}

// serve accepts connections until Close, starting a goroutine for each.
func (p *Proxy) serve() {
	defer p.wg.Done()
	var backoff time.Duration
	for {
		c, err := p.ln.Accept()
		if err != nil {
			select {
			case <-p.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient error such as too many open files: back off
			// as net/http does, and keep serving.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			t := time.NewTimer(backoff)
			select {
			case <-p.done:
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		backoff = 0
		p.wg.Add(1)
		go p.handle(c)
	}
}

// handle proxies one accepted connection until it ends or is reset.
func (p *Proxy) handle(c net.Conn) {
	defer p.wg.Done()
	p.mu.Lock()
	if p.closed || p.mode == Reject {
		p.mu.Unlock()
		resetConn(c)
		return
	}
	// A handshake needs both directions: across a partition in either
	// direction the connection could not reach the target.
	isolated := p.blockedLocked(ClientToServer) || p.blockedLocked(ServerToClient)
	l := newLink(c)
	p.links[l] = struct{}{}
	p.mu.Unlock()

	defer func() {
		p.mu.Lock()
		delete(p.links, l)
		p.mu.Unlock()
		l.cancel()
	}()
	if isolated {
		p.hold(l)
	} else {
		p.forward(l)
	}
}
