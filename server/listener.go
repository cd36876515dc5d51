package server

import (
	"net"
	"sync"
	"syscall"
)

// limitListener caps the connections it hands out, in total and per source
// address. A connection over a cap is closed as soon as it is accepted,
// before anything is read from it, and counted (refused); the client sees
// its connection reset or closed. A connection stops counting when it is
// closed.
type limitListener struct {
	net.Listener
	maxTotal     int // 0: no cap
	maxPerSource int // 0: no cap
	refused      func(cap string)

	mu       sync.Mutex
	total    int
	bySource map[string]int
}

func newLimitListener(ln net.Listener, maxTotal, maxPerSource int, refused func(cap string)) *limitListener {
	return &limitListener{Listener: ln, maxTotal: maxTotal, maxPerSource: maxPerSource, refused: refused, bySource: make(map[string]int)}
}

// Accept implements net.Listener: it returns the next connection within
// the caps, closing those over them.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		src := sourceOf(c.RemoteAddr().String())
		if over := l.admit(src); over != "" {
			c.Close()
			l.refused(over)
			continue
		}
		return &limitConn{Conn: c, release: func() { l.leave(src) }}, nil
	}
}

// admit counts a connection from src, or names the cap it would exceed.
func (l *limitListener) admit(src string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.maxTotal > 0 && l.total >= l.maxTotal:
		return "total"
	case l.maxPerSource > 0 && l.bySource[src] >= l.maxPerSource:
		return "per_source"
	}
	l.total++
	l.bySource[src]++
	return ""
}

func (l *limitListener) leave(src string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if l.bySource[src]--; l.bySource[src] <= 0 {
		delete(l.bySource, src)
	}
}

// open returns the number of connections counted.
func (l *limitListener) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

// limitConn is an admitted connection; closing it releases its place once.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

// SyscallConn returns the connection's raw connection.
func (c *limitConn) SyscallConn() (syscall.RawConn, error) { return syscallConn(c.Conn) }

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// sourceOf returns the host of a host:port address (the address itself
// when it has no port).
func sourceOf(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}
